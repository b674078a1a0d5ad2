package redisfence_test

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"

	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

// The conformance suite through a client with go-redis's defaults (RESP3,
// identity, maintenance notifications auto), as users make them.
func TestReviewConformanceDefaultClient(t *testing.T) {
	addr := redistest.New(t).Addr()
	fencetest.Run(t, func(t *testing.T) fence.Store {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		return mustNew(t, c, prefix(t))
	})
}

// Values that are large, binary, empty; field names that look like Lua
// patterns; tokens at the top of int64.
func TestReviewDataShapes(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	h := mustHash(t, c)
	big := make([]byte, 6<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	big[0], big[1], big[2] = 0, 0xff, 0xfe
	mustPut(t, s, "big", 5, string(big))
	r, err := s.Get(t.Context(), "big")
	if err != nil || !bytes.Equal(r.Value, big) {
		t.Fatalf("big value: %v, equal %v", err, bytes.Equal(r.Value, big))
	}
	if err := s.Update(t.Context(), "big", 5, func(old fence.Record) ([]byte, error) {
		if !bytes.Equal(old.Value, big) {
			t.Errorf("Update read a different value")
		}
		return append(old.Value, 0), nil
	}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "empty", 5, "")
	if r, err := s.Get(t.Context(), "empty"); err != nil || len(r.Value) != 0 {
		t.Fatalf("empty: %v %q", err, r.Value)
	}
	const max = fence.Token(math.MaxInt64)
	mustPut(t, s, "max", max-1, "a")
	mustPut(t, s, "max", max, "b")
	if err := s.Put(t.Context(), "max", max-1, []byte("c")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(max-1) after max: %v", err)
	}
	if _, err := s.GetForUpdate(t.Context(), "max", max); err != nil {
		t.Fatal(err)
	}
	// digit-by-digit: 1000000000000000000 vs 999999999999999999
	mustPut(t, s, "digits", 1000000000000000000, "a")
	if err := s.Put(t.Context(), "digits", 999999999999999999, []byte("b")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(999…) after 10^18: %v", err)
	}
	k := prefix(t) + "{tag}h"
	weird := map[string]string{"%d+": "x", "^$": "\x00\xff", ".*": "", "": "empty-name", "a\x00b": "nul"}
	if err := h.Set(t.Context(), k, 5, weird); err != nil {
		t.Fatal(err)
	}
	m, err := h.GetForUpdate(t.Context(), k, 5, "%d+", "^$", ".*", "", "a\x00b", "missing")
	if err != nil || len(m) != len(weird) {
		t.Fatalf("GetForUpdate: %v %q", err, m)
	}
	for f, v := range weird {
		if m[f] != v {
			t.Errorf("field %q: %q, want %q", f, m[f], v)
		}
	}
	if err := h.Update(t.Context(), k, 5, []string{"^$", "^$", "missing"}, func(old map[string]string) (map[string]string, error) {
		return map[string]string{"^$": old["^$"] + "!", "new": "n"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if v := field(t, c, k, "^$"); v != "\x00\xff!" {
		t.Fatalf("^$: %q", v)
	}
}

// ErrCorrupt says "The call changed nothing". A Store hash written by
// another program, with a valid floor but a token field that is not a
// token: GetForUpdate reports ErrCorrupt, and has raised the floor.
func TestReviewCorruptClaimChangesFloor(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	if err := c.HSet(t.Context(), s.Key("k"), "floor", "0000000000000000005", "token", "bogus", "value", "v").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetForUpdate(t.Context(), "k", 7)
	if !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("GetForUpdate: got %v, want ErrCorrupt", err)
	}
	if f := field(t, c, s.Key("k"), "floor"); f != "0000000000000000005" {
		t.Errorf("GetForUpdate returned %q (ErrCorrupt: \"The call changed nothing\"), but the floor is now %s, was 0000000000000000005", err, f)
	}
}

// The same with a version that is not a number: Update claims (raises the
// floor), calls fn, and its write says ErrCorrupt "(nothing changed)".
func TestReviewCorruptVersionUpdate(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	if err := c.HSet(t.Context(), s.Key("k"), "floor", "0000000000000000005", "token", "0000000000000000005", "value", "v", "version", "abc").Err(); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := s.Update(t.Context(), "k", 7, func(old fence.Record) ([]byte, error) { calls++; return []byte("w"), nil })
	if !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("Update: got %v, want ErrCorrupt", err)
	}
	if f := field(t, c, s.Key("k"), "floor"); f != "0000000000000000005" || calls != 0 {
		t.Errorf("Update returned %q after calling fn %d times; the floor is now %s, was 0000000000000000005", err, calls, f)
	}
}

// A hash whose record says token 9 wrote it, with no floor field (written
// by another program, or a floor field lost): Put with token 3 lands over
// it, and the token goes back from 9 to 3.
func TestReviewNoFloorTrustsNothing(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	if err := c.HSet(t.Context(), s.Key("k"), "token", "0000000000000000009", "value", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(t.Context(), "k"); err != nil || r.Token != 9 {
		t.Fatalf("Get: %v %v", r, err)
	}
	err := s.Put(t.Context(), "k", 3, []byte("w"))
	if !errors.Is(err, fence.ErrStale) && !errors.Is(err, redisfence.ErrCorrupt) {
		r, _ := s.Get(t.Context(), "k")
		t.Errorf("Put(3) over a record Get reports as token 9: got %v, record now token %d %q", err, r.Token, r.Value)
	}
}

// The most fields a call may take, on each Hash call.
func TestReviewMaxFields(t *testing.T) {
	c := client(t)
	h := mustHash(t, c)
	k := prefix(t) + "h"
	all := map[string]string{}
	names := []string{}
	for i := range redisfence.MaxFields {
		f := strconv.Itoa(i)
		all[f] = strings.Repeat("v", 100)
		names = append(names, f)
	}
	if err := h.Set(t.Context(), k, 5, all); err != nil {
		t.Fatal(err)
	}
	m, err := h.GetForUpdate(t.Context(), k, 5, names...)
	if err != nil || len(m) != redisfence.MaxFields {
		t.Fatalf("GetForUpdate: %d, %v", len(m), err)
	}
	if err := h.Update(t.Context(), k, 5, names[:500], func(old map[string]string) (map[string]string, error) {
		next := map[string]string{}
		for _, f := range names[500:] {
			next[f] = "w"
		}
		return next, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A hash with a token and no floor field (written by another program) is
// fenced by its token, and its own token may write it: UpdateAll's claim
// writes the floor field, which the write checks, though the token it
// fell back on was the claim's already (without the field, the write
// said "changed" at every attempt, then ErrConflict).
func TestUpdateAllHashWithTokenNoFloor(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	for _, k := range []string{acctA, acctB} {
		if err := c.HSet(t.Context(), s.Key(k), "token", "0000000000000000005", "value", "100", "version", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UpdateAll(t.Context(), both(5), transfer(10, nil)); err != nil {
		t.Fatalf("UpdateAll with the hashes' own token, no one else writing: got %v, want nil", err)
	}
	fencewant.Record(t, s, acctA, 5, "90")
	fencewant.Record(t, s, acctB, 5, "110")
}

// The same for Update, and for a token below the hash's: refused.
func TestUpdateHashWithTokenNoFloor(t *testing.T) {
	for _, tt := range []struct {
		name  string
		token fence.Token
		stale bool
	}{
		{"same token", 5, false},
		{"newer token", 6, false},
		{"older token", 4, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := client(t)
			s := mustNew(t, c, prefix(t))
			if err := c.HSet(t.Context(), s.Key("k"), "token", "0000000000000000005", "value", "v", "version", "1").Err(); err != nil {
				t.Fatal(err)
			}
			err := s.Update(t.Context(), "k", tt.token, func(fence.Record) ([]byte, error) { return []byte("w"), nil })
			if tt.stale {
				if !errors.Is(err, fence.ErrStale) {
					t.Fatalf("Update(%d) of a hash of token 5 with no floor field: got %v, want ErrStale", tt.token, err)
				}
				fencewant.Record(t, s, "k", 5, "v")
				return
			}
			if err != nil {
				t.Fatalf("Update(%d) of a hash of token 5 with no floor field: got %v, want nil", tt.token, err)
			}
			fencewant.Record(t, s, "k", tt.token, "w")
		})
	}
}
