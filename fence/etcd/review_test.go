package etcdfence_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// Tests a breaking review of the flat forms of a write wrote (the first
// against a stamped floor, b3932e1, reverted).

// A holder's Put whose caller was told fence.ErrUnknownOutcome, arriving
// late after the token was passed to another process whose Store (new, or
// one that saw no reply since long ago) wrote the key with the token and
// was acknowledged, must not replace that later write: the later write
// put the floor past any revision the late one's Store had seen. A
// breaking review found this in a stamped floor (b3932e1, reverted): the
// late write carried the old Store's higher stamp, the later one the new
// Store's lower one, and the late write landed.
func TestLateWriteAfterOtherStoreSameToken(t *testing.T) {
	later := []struct {
		name  string
		write func(t *testing.T, s *etcdfence.Store) error
		want  func(t *testing.T, s *etcdfence.Store)
	}{
		{"Put", func(t *testing.T, s *etcdfence.Store) error {
			return s.Put(t.Context(), "k", 2, []byte("from b"))
		}, func(t *testing.T, s *etcdfence.Store) { wantRecord(t, s, "k", 2, "from b") }},
		{"Delete", func(t *testing.T, s *etcdfence.Store) error {
			return s.Delete(t.Context(), "k", 2)
		}, func(t *testing.T, s *etcdfence.Store) {
			if r, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
				t.Fatalf("Get after the acknowledged Delete and the late Put: got %q (token %d), %v; want ErrNotFound", r.Value, r.Token, err)
			}
		}},
	}
	for _, floor := range []string{"lower token", "none", "a floor of the token", "control: b is a"} {
		for _, tt := range later {
			t.Run(floor+"/"+tt.name, func(t *testing.T) {
				fcli, in := faulty(t)
				direct := etcdClient(t)
				p := prefix(t)
				a := mustNew(t, fcli, p)
				switch floor {
				case "lower token":
					mustPut(t, mustNew(t, direct, p), "k", 1, "v1")
				case "a floor of the token":
					if _, err := direct.Put(t.Context(), a.FloorKey("k"), fmt.Sprintf("%019d", 2)); err != nil {
						t.Fatal(err)
					}
				}
				// a has seen revisions (any reply does), b none.
				mustPut(t, a, "other", 2, "x")
				held := holdPut(t, in, a, "k", 2, "from a, late")
				// The token goes to another process: a Store of its own, seen 0.
				b := mustNew(t, etcdClient(t), p)
				if floor == "control: b is a" {
					b = a // one Store
				}
				if err := tt.write(t, b); err != nil {
					t.Fatalf("b's write: got %v, want nil", err)
				}
				tt.want(t, b)
				if err := held.Release(t.Context()); err != nil {
					t.Fatalf("late Put's delivery: got %v, want nil", err)
				}
				tt.want(t, b)
			})
		}
	}
}

// An UpdateAll of MaxUpdateAllKeys keys whose values are the largest
// checkSizeAll's estimate passes (DefaultMaxRequestBytes, etcd's default
// --max-request-bytes, which the shared member runs with) must be taken
// by etcd too. Until then the estimate allowed 16 bytes a key for the
// protobuf framing of its five operations (two compares, two puts, a
// get), which take about 38, and etcd refused the request as too large.
func TestUpdateAllSizeEstimateAtLimit(t *testing.T) {
	fcli, in := faulty(t)
	s := mustNew(t, fcli, prefix(t))
	claims := make([]fence.Claim, etcdfence.MaxUpdateAllKeys)
	for i := range claims {
		claims[i] = fence.Claim{Resource: fmt.Sprintf("k%02d", i), Token: 2}
	}
	var sent int
	in.Before(putsKey(s.DataKey(claims[0].Resource)), func(any) { sent++ })
	per := etcdfence.DefaultMaxRequestBytes/len(claims) - 1024
	update := func(n int) error {
		next := make(map[string][]byte, len(claims))
		for i, c := range claims {
			next[c.Resource] = make([]byte, per)
			if i == 0 {
				next[c.Resource] = make([]byte, n)
			}
		}
		return s.UpdateAll(t.Context(), claims, func(map[string]fence.Record) (map[string][]byte, error) { return next, nil })
	}
	// The largest size of the first value the estimate passes: the write
	// is sent.
	passes := func(n int) bool {
		before := sent
		_ = update(n)
		return sent > before
	}
	lo, hi := 0, 2*len(claims)*1024 // passes(lo), !passes(hi)
	if !passes(lo) || passes(hi) {
		t.Fatalf("the estimate: passes(0) %v, passes(%d) %v; want true, false", passes(lo), hi, passes(hi))
	}
	for hi-lo > 1 {
		if m := (lo + hi) / 2; passes(m) {
			lo = m
		} else {
			hi = m
		}
	}
	if err := update(lo); err != nil {
		t.Fatalf("UpdateAll of the largest values the estimate passes: got %v, want nil", err)
	}
}

// Put and Update with a value that makes checkSize's estimate exactly the
// limit are taken by etcd (these hold: the 256 bytes of requestFraming
// cover one key's framing).
func TestPutSizeEstimateAtLimit(t *testing.T) {
	s := newStore(t)
	k := "k"
	est := 6*len(s.FloorKey(k)) + len(s.DataKey(k)) + 3*etcdfence.TokenDigits + 256 // checkSize's
	v := make([]byte, etcdfence.DefaultMaxRequestBytes-est)
	if err := s.Put(t.Context(), k, 2, v); err != nil {
		t.Fatalf("Put at the estimate's limit: got %v, want nil", err)
	}
	if err := s.Put(t.Context(), k, 2, append(v, 0)); !errors.Is(err, etcdfence.ErrValueTooLarge) {
		t.Fatalf("Put one byte past: got %v, want ErrValueTooLarge", err)
	}
	u := v[:len(v)-len(s.DataKey(k))]
	if err := s.Update(t.Context(), k, 2, func(fence.Record) ([]byte, error) { return u, nil }); err != nil {
		t.Fatalf("Update at the estimate's limit: got %v, want nil", err)
	}
}

// Tokens near math.MaxInt64: the floor stays 19 digits, a lower token is
// refused, copies of the top token's
// earlier write are refused after its later one, and claims work.
func TestTokensNearMaxInt64(t *testing.T) {
	fcli, in := faulty(t)
	direct := etcdClient(t)
	s := mustNew(t, fcli, prefix(t))
	top := int64(math.MaxInt64)
	mustPut(t, s, "k", top-1, "v0")
	sent := capture(in, s.DataKey("k"))
	mustPut(t, s, "k", top, "v1")
	mustPut(t, s, "k", top, "v2")
	resendNoWrite(t, direct, <-sent)
	wantRecord(t, s, "k", top, "v2")
	fencewant.Stale(t, s.Put(t.Context(), "k", fence.Token(top-1), []byte("stale")), fence.Token(top-1), fence.Token(top))
	if v, _ := rawValue(t, direct, s.FloorKey("k")); v != fmt.Sprint(top) {
		t.Fatalf("floor: %q, want %d", v, top)
	}
	if r, err := s.GetForUpdate(t.Context(), "k", fence.Token(top)); err != nil || string(r.Value) != "v2" {
		t.Fatalf("GetForUpdate(MaxInt64): got %q, %v; want v2", r.Value, err)
	}
}

// From a breaking review of the two flat forms (a6e959a).

// A corrupt floor whose value is a token followed by a byte below '0'
// ("0000000000000000002 ", "0000000000000000002/", "…\n": a floor put by
// hand with a trailing space or newline) sorts above the token, byte-wise,
// and below token+"0". The holder's repeated write of that token is sent
// in the second form, If(Value(floor) < token+"0", ModRevision(floor) <
// seen+1) Then(write), which lands on it and overwrites the corrupt floor
// silently, once the Store has seen the revision that put it (any reply
// of any request does). The sequence:
//
//  1. s.Put(k, 2, "v1"): lands; s's guess for k is 2.
//  2. etcdctl put FLOOR(k) "0000000000000000002 " (by hand, or another
//     tool).
//  3. s.Get(k) (or any request of s): s's seen passes step 2's revision.
//  4. s.Put(k, 2, "v2"): second form; lands, floor back to
//     "0000000000000000002", data "v2". Want ErrCorrupt, nothing changed.
//
// The first form (a Store with no guess for k: the control) and
// GetForUpdate refuse the same floor with ErrCorrupt, as the nested Txn of
// e1b4ab9 did for both (If(Value(floor) > token) Then(Get(floor))): the
// outcome depends on the Store's guess. The same with token MaxInt64, and
// with Delete.
func TestCorruptFloorTokenPrefixSecondForm(t *testing.T) {
	for _, tok := range []int64{2, math.MaxInt64} {
		for _, suffix := range []string{" ", "/", "\n"} {
			for _, form := range []string{"second", "control: first"} {
				for _, op := range []string{"Put", "Delete"} {
					t.Run(fmt.Sprintf("%d%q/%s/%s", tok, suffix, form, op), func(t *testing.T) {
						direct := etcdClient(t)
						p := prefix(t)
						s := mustNew(t, etcdClient(t), p)
						mustPut(t, s, "k", tok, "v1")
						bad := fmt.Sprintf("%019d", tok) + suffix
						if _, err := direct.Put(t.Context(), s.FloorKey("k"), bad); err != nil {
							t.Fatal(err)
						}
						if form != "second" {
							s = mustNew(t, etcdClient(t), p) // no guess: the first form
						}
						wantRecord(t, s, "k", tok, "v1") // s sees the corruption's revision
						var err error
						if op == "Put" {
							err = s.Put(t.Context(), "k", fence.Token(tok), []byte("v2"))
						} else {
							err = s.Delete(t.Context(), "k", fence.Token(tok))
						}
						if !errors.Is(err, etcdfence.ErrCorrupt) {
							t.Errorf("%s against floor %q: got %v, want an error matching ErrCorrupt", op, bad, err)
						}
						if v, _ := rawValue(t, direct, s.FloorKey("k")); v != bad {
							t.Errorf("floor after the %s: %q, want %q unchanged", op, v, bad)
						}
						wantRecord(t, s, "k", tok, "v1")
					})
				}
			}
		}
	}
}

// The edges of the forms' compares: token 1 (the first form compares the
// floor with "0000000000000000000") and token MaxInt64 (the second with
// "9223372036854775807"+"\x00"). A copy of each form's write, delivered
// after the next write of the token, is refused, and a write with the
// token below is refused as stale. (These hold.)
func TestFormsAtTokenEdges(t *testing.T) {
	for _, tok := range []int64{1, math.MaxInt64} {
		for _, form := range []string{"first", "second"} {
			t.Run(fmt.Sprintf("%d/%s", tok, form), func(t *testing.T) {
				fcli, in := faulty(t)
				direct := etcdClient(t)
				s := mustNew(t, fcli, prefix(t))
				if form == "second" {
					mustPut(t, s, "k", tok, "v0")
				}
				sent := capture(in, s.DataKey("k"))
				mustPut(t, s, "k", tok, "v1")
				mustPut(t, s, "k", tok, "v2")
				resendNoWrite(t, direct, <-sent)
				wantRecord(t, s, "k", tok, "v2")
				if tok > 1 {
					fencewant.Stale(t, s.Put(t.Context(), "k", fence.Token(tok-1), []byte("stale")), fence.Token(tok-1), fence.Token(tok))
				}
				if v, _ := rawValue(t, direct, s.FloorKey("k")); v != fmt.Sprintf("%019d", tok) {
					t.Fatalf("floor: %q, want %019d", v, tok)
				}
			})
		}
	}
}
