package etcdfence_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// Bad arguments to GetForUpdate and Update are refused before any
// transaction is sent.
func TestUpdateBadInput(t *testing.T) {
	fcli, in := faulty(t)
	s := mustNew(t, fcli, prefix(t))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	tests := []struct {
		name  string
		ctx   context.Context
		key   string
		token fence.Token
		fn    fence.UpdateFunc
		want  error
	}{
		{"empty key", t.Context(), "", 1, increment, fence.ErrInvalidKey},
		{"zero token", t.Context(), "k", 0, increment, fence.ErrInvalidToken},
		{"negative token", t.Context(), "k", -1, increment, fence.ErrInvalidToken},
		{"nil function", t.Context(), "k", 1, nil, fence.ErrInvalidArgument},
		{"nil context", nilCtx, "k", 1, increment, fence.ErrInvalidArgument},
		{"cancelled context", cancelled, "k", 1, increment, context.Canceled},
		{"key too long", t.Context(), string(bytes.Repeat([]byte("k"), etcdfence.DefaultMaxRequestBytes)), 1, increment, etcdfence.ErrValueTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Update(tt.ctx, tt.key, tt.token, tt.fn); !errors.Is(err, tt.want) {
				t.Errorf("Update: got %v, want an error matching %v", err, tt.want)
			}
			if tt.fn == nil {
				return
			}
			if _, err := s.GetForUpdate(tt.ctx, tt.key, tt.token); !errors.Is(err, tt.want) {
				t.Errorf("GetForUpdate: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	if n := in.Calls("KV/Txn"); n != 0 {
		t.Fatalf("transactions sent: got %d, want 0", n)
	}
}

// A value from fn too large for one request is refused, and nothing is
// written; the claim stays.
func TestUpdateValueTooLarge(t *testing.T) {
	s := newStore(t)
	mustPut(t, s, "k", 1, "v1")
	big := bytes.Repeat([]byte("x"), etcdfence.DefaultMaxRequestBytes)
	err := s.Update(t.Context(), "k", 2, func(fence.Record) ([]byte, error) { return big, nil })
	if !errors.Is(err, etcdfence.ErrValueTooLarge) || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Update with a %d-byte value: got %v, want an error matching ErrValueTooLarge", len(big), err)
	}
	wantRecord(t, s, "k", 1, "v1")
	fencewant.Stale(t, s.Put(t.Context(), "k", 1, []byte("late")), 1, 2)
}

// The first claim with a token raises the floor, and writes the floor key
// alone when the key has no value; a second claim with the same token is
// a read, and writes nothing.
func TestGetForUpdateWritesOnlyToRaise(t *testing.T) {
	cli := etcdClient(t)
	s := mustNew(t, cli, prefix(t))
	if _, err := s.GetForUpdate(t.Context(), "k", 4); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate of a key never written: got %v, want an error matching fence.ErrNotFound", err)
	}
	if v, _ := rawValue(t, cli, s.FloorKey("k")); v != "0000000000000000004" {
		t.Fatalf("floor after the claim: got %q, want token 4", v)
	}
	if _, ok := rawValue(t, cli, s.DataKey("k")); ok {
		t.Fatal("data key after a claim of a key with no value: present, want none")
	}
	mustPut(t, s, "k", 4, "v4")
	before := revision(t, cli)
	r, err := s.GetForUpdate(t.Context(), "k", 4)
	if err != nil || string(r.Value) != "v4" || r.Token != 4 {
		t.Fatalf("GetForUpdate(4) again: got token %d %q, %v; want token 4 \"v4\", nil", r.Token, r.Value, err)
	}
	_, err = s.GetForUpdate(t.Context(), "k", 3)
	fencewant.Stale(t, err, 3, 4)
	if after := revision(t, cli); after != before {
		t.Fatalf("revision after a claim with the floor's token and a stale one: got %d, want %d (nothing written)", after, before)
	}
}

// A floor or record this package did not write is reported, not read.
func TestGetForUpdateCorrupt(t *testing.T) {
	cli := etcdClient(t)
	s := mustNew(t, cli, prefix(t))
	if _, err := cli.Put(t.Context(), s.FloorKey("k"), "not a token"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), "k", 1); !errors.Is(err, etcdfence.ErrCorrupt) {
		t.Errorf("GetForUpdate against floor %q: got %v, want an error matching ErrCorrupt", "not a token", err)
	}
	if _, err := cli.Put(t.Context(), s.DataKey("j"), "short"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), "j", 1, increment); !errors.Is(err, etcdfence.ErrCorrupt) {
		t.Errorf("Update of data %q: got %v, want an error matching ErrCorrupt", "short", err)
	}
}

// A same-token write that lands between each read and write makes Update
// give up after fence.UpdateAttempts, with ErrConflict, having written
// nothing of its own.
func TestUpdateConflict(t *testing.T) {
	s := newStore(t)
	calls := 0
	err := s.Update(t.Context(), "k", 3, func(fence.Record) ([]byte, error) {
		calls++
		mustPut(t, s, "k", 3, "other "+strconv.Itoa(calls))
		return []byte("mine"), nil
	})
	if !errors.Is(err, fence.ErrConflict) || calls != fence.UpdateAttempts {
		t.Fatalf("Update under a writer that always comes between: got %v after %d calls, want ErrConflict after %d",
			err, calls, fence.UpdateAttempts)
	}
	wantRecord(t, s, "k", 3, "other "+strconv.Itoa(fence.UpdateAttempts))
}

// A newer holder's claim between Update's read and its write refuses the
// write with ErrStale, and fn is not called again.
func TestUpdateStaleAtWrite(t *testing.T) {
	s := newStore(t)
	mustPut(t, s, "k", 3, "1")
	calls := 0
	err := s.Update(t.Context(), "k", 3, func(old fence.Record) ([]byte, error) {
		calls++
		if _, err := s.GetForUpdate(t.Context(), "k", 8); err != nil {
			t.Fatal(err)
		}
		return increment(old)
	})
	fencewant.Stale(t, err, 3, 8)
	if calls != 1 {
		t.Fatalf("fn called %d times, want 1", calls)
	}
	wantRecord(t, s, "k", 3, "1")
}

// increment is an UpdateFunc that counts: no value is 0.
func increment(old fence.Record) ([]byte, error) {
	n := 0
	if old.Value != nil {
		var err error
		if n, err = strconv.Atoi(string(old.Value)); err != nil {
			return nil, err
		}
	}
	return strconv.AppendInt(nil, int64(n+1), 10), nil
}
