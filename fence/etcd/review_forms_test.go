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

// Tests a breaking review of the two flat forms of a write (a6e959a)
// wrote.

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
