package etcdfence_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Tests of UpdateAll's write when it loses its reply, arrives twice, or
// arrives late, with reqfault between the client and etcd.

// transfer is an UpdateAllFunc that moves n from account a to account b.
func transfer(a, b string, n int) fence.UpdateAllFunc {
	return func(old map[string]fence.Record) (map[string][]byte, error) {
		x, err := strconv.Atoi(string(old[a].Value))
		if err != nil {
			return nil, err
		}
		y, err := strconv.Atoi(string(old[b].Value))
		if err != nil {
			return nil, err
		}
		return map[string][]byte{a: []byte(strconv.Itoa(x - n)), b: []byte(strconv.Itoa(y + n))}, nil
	}
}

// both claims a and b with token.
func both(token fence.Token) []fence.Claim {
	return []fence.Claim{{Resource: "a", Token: token}, {Resource: "b", Token: token}}
}

// A transfer whose write loses its reply, or is delivered twice, says
// success or ErrUnknownOutcome, and lands once: both legs, never one,
// never twice.
func TestUpdateAllWriteFaults(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault reqfault.Kind
	}{
		{"reply lost", reqfault.LostReply},
		{"delivered twice", reqfault.Twice},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fcli, in := faulty(t)
			s := mustNew(t, fcli, prefix(t))
			mustPut(t, s, "a", 3, "100")
			mustPut(t, s, "b", 3, "100")
			in.Next(putsKey(s.DataKey("a")), tt.fault)
			if err := s.UpdateAll(t.Context(), both(3), transfer("a", "b", 10)); err != nil {
				fencewant.Unknown(t, err, 3, fence.ErrConflict, etcdfence.ErrValueTooLarge)
			}
			in.Close() // waits for a copy's delivery
			if n := in.Counts()[tt.fault]; n != 1 {
				t.Fatalf("faults injected: got %d, want 1", n)
			}
			wantRecord(t, s, "a", 3, "90")
			wantRecord(t, s, "b", 3, "110")
		})
	}
}

// A transfer's write held until its caller gave up (ErrUnknownOutcome),
// then delivered after other writes, is refused as a whole: after
// transfers with the same token (the mod revision compares), and after a
// newer holder's (the floor compares).
func TestUpdateAllLateWrite(t *testing.T) {
	for _, tt := range []struct {
		name  string
		token fence.Token
	}{
		{"after the same holder's transfers", 3},
		{"after a newer holder's transfers", 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fcli, in := faulty(t)
			s := mustNew(t, fcli, prefix(t))
			direct := mustNew(t, etcdClient(t), s.Prefix())
			mustPut(t, s, "a", 3, "100")
			mustPut(t, s, "b", 3, "100")
			held := in.Hold(putsKey(s.DataKey("a")))
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan error, 1)
			go func() { got <- s.UpdateAll(ctx, both(3), transfer("a", "b", 10)) }()
			<-held.Caught()
			cancel()
			fencewant.Unknown(t, <-got, 3, fence.ErrConflict, etcdfence.ErrValueTooLarge)
			for range 2 {
				if err := direct.UpdateAll(t.Context(), both(tt.token), transfer("b", "a", 1)); err != nil {
					t.Fatalf("the other transfer: got %v, want nil", err)
				}
			}
			if err := held.Release(t.Context()); err != nil {
				t.Fatalf("late write's delivery: got %v, want nil (etcd answers a refusal)", err)
			}
			wantRecord(t, direct, "a", int64(tt.token), "102")
			wantRecord(t, direct, "b", int64(tt.token), "98")
		})
	}
}

// A copy of a transfer's write, delivered after a later transfer with the
// same token, is refused by the mod revision compares of the data keys and
// the floors (each write puts the floors). The control sends the same copy
// comparing the floors' values with the token instead, and the data keys
// not at all: it writes the old balances over the new ones, and an
// acknowledged transfer is lost.
func TestUpdateAllCopyAfterLaterUpdate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		strip   bool
		landed  bool
		a, b    string
		explain string
	}{
		{"copy refused", false, false, "80", "120", "the copy landed over a later transfer"},
		{"control: copy comparing only the floors' values lands", true, true, "90", "110", "the control proves nothing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fcli, in := faulty(t)
			direct := etcdClient(t)
			s := mustNew(t, fcli, prefix(t))
			mustPut(t, s, "a", 3, "100")
			mustPut(t, s, "b", 3, "100")
			sent := capture(in, s.DataKey("a"))
			for range 2 {
				if err := s.UpdateAll(t.Context(), both(3), transfer("a", "b", 10)); err != nil {
					t.Fatal(err)
				}
			}
			req := <-sent
			if tt.strip {
				req = floorByValue(s, withoutDataCompare(s, req), 3)
			}
			if resp := resend(t, direct, req); resp.Succeeded != tt.landed {
				t.Fatalf("copy of the first transfer's write: landed %v, want %v: %s", resp.Succeeded, tt.landed, tt.explain)
			}
			wantRecord(t, s, "a", 3, tt.a)
			wantRecord(t, s, "b", 3, tt.b)
		})
	}
}

// A claim that raises the floors and loses its reply says
// ErrUnknownOutcome (the floors were raised, together).
func TestUpdateAllClaimLostReply(t *testing.T) {
	fcli, in := faulty(t)
	s := mustNew(t, fcli, prefix(t))
	mustPut(t, s, "a", 3, "100")
	mustPut(t, s, "b", 3, "100")
	in.Next(putsKey(s.FloorKey("b")), reqfault.LostReply)
	called := false
	err := s.UpdateAll(t.Context(), both(5), func(map[string]fence.Record) (map[string][]byte, error) {
		called = true
		return nil, nil
	})
	fencewant.Unknown(t, err, 5, etcdfence.ErrValueTooLarge)
	if called {
		t.Error("fn ran after a claim whose reply was lost; want the call ended there")
	}
	for _, k := range []string{"a", "b"} {
		fencewant.Stale(t, s.Put(t.Context(), k, 4, []byte("late")), 4, 5)
	}
}

// A copy of a write that created its keys (each data key absent at the
// read: mod revision 0), delivered after the same holder deleted them
// (absent again, mod revision 0 again), is refused by the floors' mod
// revision compares: each Delete wrote its floor again. The control
// compares the floors' values, which the Deletes left as they were: the
// copy brings the deleted keys back with the old transfer's values.
func TestUpdateAllCopyAfterSameTokenDelete(t *testing.T) {
	for _, tt := range []struct {
		name    string
		byValue bool
	}{
		{"copy refused", false},
		{"control: copy comparing the floors' values lands", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fcli, in := faulty(t)
			direct := etcdClient(t)
			s := mustNew(t, fcli, prefix(t))
			sent := capture(in, s.DataKey("a"))
			create := func(map[string]fence.Record) (map[string][]byte, error) {
				return map[string][]byte{"a": []byte("100"), "b": []byte("100")}, nil
			}
			if err := s.UpdateAll(t.Context(), both(3), create); err != nil {
				t.Fatal(err)
			}
			req := <-sent
			for _, k := range []string{"a", "b"} {
				if err := s.Delete(t.Context(), k, 3); err != nil {
					t.Fatal(err)
				}
			}
			if tt.byValue {
				req = floorByValue(s, req, 3)
			}
			if resp := resend(t, direct, req); resp.Succeeded != tt.byValue {
				t.Fatalf("copy of the creating write after the same holder's Deletes: landed %v, want %v", resp.Succeeded, tt.byValue)
			}
			for _, k := range []string{"a", "b"} {
				r, err := s.Get(t.Context(), k)
				if gone := errors.Is(err, fence.ErrNotFound); gone == tt.byValue {
					t.Errorf("Get(%q) after the copy: got %q, %v; want deleted %v", k, r.Value, err, !tt.byValue)
				}
			}
		})
	}
}
