package etcdfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/tokentext"
)

// Tests of GetForUpdate's and Update's requests that arrive late, twice,
// or lose their reply, with reqfault between the client and etcd.

// An Update of a counter whose write loses its reply, is delivered twice,
// or is held until the caller gave up and delivered after other
// increments, says success or ErrUnknownOutcome, and the counter counts
// each increment once: never twice, and never one lost.
func TestUpdateWriteFaults(t *testing.T) {
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
			mustPut(t, s, "k", 3, "1")
			in.Next(putsKey(s.DataKey("k")), tt.fault)
			if err := s.Update(t.Context(), "k", 3, increment); err != nil {
				fencewant.Unknown(t, err, 3, fence.ErrConflict, etcdfence.ErrValueTooLarge)
			}
			in.Close() // waits for a copy's delivery
			if n := in.Counts()[tt.fault]; n != 1 {
				t.Fatalf("faults injected: got %d, want 1", n)
			}
			wantRecord(t, s, "k", 3, "2")
			if err := s.Update(t.Context(), "k", 3, increment); err != nil {
				t.Fatalf("next Update: got %v, want nil", err)
			}
			wantRecord(t, s, "k", 3, "3")
		})
	}
	t.Run("late, after other increments", func(t *testing.T) {
		fcli, in := faulty(t)
		s := mustNew(t, fcli, prefix(t))
		direct := mustNew(t, etcdClient(t), s.Prefix())
		mustPut(t, s, "k", 3, "1")
		held := in.Hold(putsKey(s.DataKey("k")))
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() { got <- s.Update(ctx, "k", 3, increment) }()
		<-held.Caught()
		cancel()
		fencewant.Unknown(t, <-got, 3, fence.ErrConflict, etcdfence.ErrValueTooLarge)
		for range 2 { // the late write, of 2, would now lose an increment
			if err := direct.Update(t.Context(), "k", 3, increment); err != nil {
				t.Fatalf("the other Update: got %v, want nil", err)
			}
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("late write's delivery: got %v, want nil (etcd answers a refusal)", err)
		}
		wantRecord(t, direct, "k", 3, "3")
	})
}

// A copy of an Update's write, delivered after a later Update with the
// same token, is refused by the mod revision compares of the data key and
// the floor (each write puts the floor). The control sends the same copy
// comparing the floor's value with the token instead, and the data key not
// at all: it writes the old count over the new one, and an acknowledged
// increment is lost.
func TestUpdateCopyAfterLaterUpdate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		strip   bool
		landed  bool
		want    string
		explain string
	}{
		{"copy refused", false, false, "3", "the copy landed over a later Update"},
		{"control: copy comparing only the floor's value lands", true, true, "2", "the control proves nothing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fcli, in := faulty(t)
			direct := etcdClient(t)
			s := mustNew(t, fcli, prefix(t))
			mustPut(t, s, "k", 3, "1")
			sent := capture(in, s.DataKey("k"))
			for range 2 {
				if err := s.Update(t.Context(), "k", 3, increment); err != nil {
					t.Fatal(err)
				}
			}
			req := <-sent
			if tt.strip {
				req = floorByValue(s, withoutDataCompare(s, req), 3)
			}
			if resp := resend(t, direct, req); resp.Succeeded != tt.landed {
				t.Fatalf("copy of the first Update's write: landed %v, want %v: %s", resp.Succeeded, tt.landed, tt.explain)
			}
			wantRecord(t, s, "k", 3, tt.want)
		})
	}
}

// withoutDataCompare returns req without its compares of the data keys'
// mod revisions, as a read-modify-write that compared only the floor would
// send.
func withoutDataCompare(s *etcdfence.Store, req *pb.TxnRequest) *pb.TxnRequest {
	out := &pb.TxnRequest{Success: req.Success, Failure: req.Failure}
	for _, c := range req.Compare {
		if !strings.HasPrefix(string(c.Key), s.DataKey("")) {
			out.Compare = append(out.Compare, c)
		}
	}
	return out
}

// floorByValue returns req with its compares of the floors' mod revisions
// turned into compares of their values with token, as a write that
// compared the floor's value would send: a Delete with the same token
// leaves that value as it was.
func floorByValue(s *etcdfence.Store, req *pb.TxnRequest, token fence.Token) *pb.TxnRequest {
	out := &pb.TxnRequest{Success: req.Success, Failure: req.Failure}
	for _, c := range req.Compare {
		if strings.HasPrefix(string(c.Key), s.FloorKey("")) {
			c = &pb.Compare{Key: c.Key, Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL,
				TargetUnion: &pb.Compare_Value{Value: []byte(tokentext.Pad(token))}}
		}
		out.Compare = append(out.Compare, c)
	}
	return out
}

// A copy of an Update's write that created the key, delivered after the
// same holder deleted the key (its data key absent again, mod revision 0
// as at the read), is refused by the floor's mod revision compare: the
// Delete wrote the floor again. The control compares the floor's value,
// which the Delete left as it was: the copy brings the deleted key back.
func TestUpdateCopyAfterSameTokenDelete(t *testing.T) {
	for _, tt := range []struct {
		name    string
		byValue bool
	}{
		{"copy refused", false},
		{"control: copy comparing the floor's value lands", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fcli, in := faulty(t)
			direct := etcdClient(t)
			s := mustNew(t, fcli, prefix(t))
			sent := capture(in, s.DataKey("k"))
			if err := s.Update(t.Context(), "k", 3, func(fence.Record) ([]byte, error) { return []byte("v"), nil }); err != nil {
				t.Fatal(err)
			}
			req := <-sent
			if err := s.Delete(t.Context(), "k", 3); err != nil {
				t.Fatal(err)
			}
			if tt.byValue {
				req = floorByValue(s, req, 3)
			}
			if resp := resend(t, direct, req); resp.Succeeded != tt.byValue {
				t.Fatalf("copy of the creating Update's write after the same holder's Delete: landed %v, want %v", resp.Succeeded, tt.byValue)
			}
			r, err := s.Get(t.Context(), "k")
			if gone := errors.Is(err, fence.ErrNotFound); gone == tt.byValue {
				t.Errorf("Get after the copy: got %q, %v; want deleted %v", r.Value, err, !tt.byValue)
			}
		})
	}
}

// A claim that raises the floor and loses its reply says ErrUnknownOutcome
// (the floor was raised); one that only reads, and loses its reply, says
// so with an error that is no unknown outcome, having changed nothing.
func TestGetForUpdateLostReply(t *testing.T) {
	fcli, in := faulty(t)
	direct := etcdClient(t)
	s := mustNew(t, fcli, prefix(t))
	mustPut(t, s, "k", 3, "v3")
	in.Next(putsKey(s.FloorKey("k")), reqfault.LostReply)
	_, err := s.GetForUpdate(t.Context(), "k", 5)
	fencewant.Unknown(t, err, 5, etcdfence.ErrValueTooLarge)
	fencewant.Stale(t, s.Put(t.Context(), "k", 4, []byte("late")), 4, 5)

	before := revision(t, direct)
	in.Next(readOnly, reqfault.LostReply)
	_, err = s.GetForUpdate(t.Context(), "k", 5)
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("read-only claim whose reply was lost: got %v, want an error that is no unknown outcome", err)
	}
	if after := revision(t, direct); after != before {
		t.Fatalf("revision after the read-only claim: got %d, want %d", after, before)
	}
	wantRecord(t, s, "k", 3, "v3")
}

// readOnly matches transactions that only read.
func readOnly(_ string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range append(txn.Success, txn.Failure...) {
		if op.GetRequestRange() == nil {
			return false
		}
	}
	return true
}
