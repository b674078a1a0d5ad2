package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Tests of write requests that arrive late, twice, or lose their reply,
// with reqfault between a writer's client and etcd.

// A paused holder's Put, held in flight and delivered after a newer token's
// Put, is refused by etcd and changes nothing, not even the revision.
func TestLatePutRefused(t *testing.T) {
	fcli, in := faulty(t)
	direct := etcdClient(t)
	p, k := prefix(t), "k"
	old, newer := mustNew(t, fcli, p), mustNew(t, direct, p)
	mustPut(t, old, k, 1, "v1")

	held := holdPut(t, in, old, k, 2, "v2 late", etcdfence.ErrValueTooLarge)

	mustPut(t, newer, k, 3, "v3")
	before := revision(t, direct)
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("late Put's delivery: got %v, want nil (etcd answers a refusal)", err)
	}
	wantRecord(t, newer, k, 3, "v3")
	if v, _ := rawValue(t, direct, newer.FloorKey(k)); v != "0000000000000000003" {
		t.Fatalf("floor after the late Put: got %q, want token 3", v)
	}
	if after := revision(t, direct); after != before {
		t.Fatalf("revision after the late Put: got %d, want %d (nothing written)", after, before)
	}
}

// The control for TestLatePutRefused: the same late write, sent as the
// plain put an unfenced writer would send, lands over the newer one.
func TestLatePlainPutLands(t *testing.T) {
	fcli, in := faulty(t)
	direct := etcdClient(t)
	p, k := prefix(t), "k"
	s := mustNew(t, direct, p)
	mustPut(t, s, k, 1, "v1")

	stale := "0000000000000000002v2 late" // a record with token 2, as the Store encodes it
	held := in.Hold(putsKey(s.DataKey(k)))
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := fcli.Txn(ctx).Then(clientv3.OpPut(s.DataKey(k), stale)).Commit()
		got <- err
	}()
	<-held.Caught()
	cancel()
	if err := <-got; err == nil {
		t.Fatal("held plain put: got nil, want its context's error")
	}
	mustPut(t, s, k, 3, "v3")
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("late plain put's delivery: got %v, want nil", err)
	}
	wantRecord(t, s, k, 2, "v2 late")
}

// A Put whose reply is lost says ErrUnknownOutcome, keeping the client's
// error as its cause; the key holds the old record while the request is in
// flight and the new one, whole, once it is applied.
func TestLostReplyUnknownOutcome(t *testing.T) {
	t.Run("applied, reply lost", func(t *testing.T) {
		fcli, in := faulty(t)
		s := mustNew(t, fcli, prefix(t))
		mustPut(t, s, "k", 1, "v1")
		in.Next(putsKey(s.DataKey("k")), reqfault.LostReply)
		err := s.Put(t.Context(), "k", 2, []byte("v2"))
		fencewant.Unknown(t, err, 2, etcdfence.ErrValueTooLarge)
		if ue := (*fence.UnknownOutcomeError)(nil); !errors.As(err, &ue) || ue.Err == nil {
			t.Fatalf("lost reply: got %v, want an UnknownOutcomeError with the client's error", err)
		}
		wantRecord(t, s, "k", 2, "v2")
	})
	t.Run("deadline in flight", func(t *testing.T) {
		fcli, in := faulty(t)
		s := mustNew(t, fcli, prefix(t))
		mustPut(t, s, "k", 1, "v1")
		held := in.Hold(putsKey(s.DataKey("k")))
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		err := s.Put(ctx, "k", 2, []byte("v2"))
		fencewant.Unknown(t, err, 2, etcdfence.ErrValueTooLarge)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Put past its deadline: got %v, want its cause to match context.DeadlineExceeded", err)
		}
		wantRecord(t, s, "k", 1, "v1")
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("delivery: got %v, want nil", err)
		}
		wantRecord(t, s, "k", 2, "v2")
	})
}

// A Put delivered twice is harmless: a copy that arrives right after it
// finds the floor put by the Put itself and changes nothing, and a copy
// that arrives after a newer token's Put is refused.
func TestDuplicatedPutHarmless(t *testing.T) {
	t.Run("copy right after", func(t *testing.T) {
		fcli, in := faulty(t)
		s := mustNew(t, fcli, prefix(t))
		in.Next(putsKey(s.DataKey("k")), reqfault.Twice)
		mustPut(t, s, "k", 2, "v2")
		in.Close() // waits for the copy's delivery
		if got := in.Counts()[reqfault.Twice]; got != 1 {
			t.Fatalf("copies sent: got %d, want 1", got)
		}
		wantRecord(t, s, "k", 2, "v2")
	})
	t.Run("copy after a newer token", func(t *testing.T) {
		fcli, in := faulty(t)
		direct := etcdClient(t)
		s := mustNew(t, fcli, prefix(t))
		sent := capture(in, s.DataKey("k"))
		mustPut(t, s, "k", 2, "v2")
		mustPut(t, s, "k", 3, "v3")
		if resp := resendNoWrite(t, direct, <-sent); !resp.Succeeded {
			t.Fatal("copy of the token-2 Put after token 3: took the write branch, want the refusal")
		}
		wantRecord(t, s, "k", 3, "v3")
	})
	t.Run("control: plain put copied after a newer one lands", func(t *testing.T) {
		fcli, in := faulty(t)
		direct := etcdClient(t)
		s := mustNew(t, direct, prefix(t))
		sent := capture(in, s.DataKey("k"))
		if _, err := fcli.Txn(t.Context()).Then(clientv3.OpPut(s.DataKey("k"), "0000000000000000002v2")).Commit(); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, "k", 3, "v3")
		resend(t, direct, <-sent)
		wantRecord(t, s, "k", 2, "v2")
	})
}

// capture returns a channel that receives the first transaction putting key
// that in's client sends.
func capture(in *reqfault.Injector, key string) <-chan *pb.TxnRequest {
	sent := make(chan *pb.TxnRequest, 1)
	in.Before(putsKey(key), func(req any) {
		select {
		case sent <- req.(*pb.TxnRequest):
		default:
		}
	})
	return sent
}

// resendNoWrite is resend of a copy that must write nothing: etcd's
// revision is the same after it.
func resendNoWrite(t *testing.T, cli *clientv3.Client, req *pb.TxnRequest) *pb.TxnResponse {
	t.Helper()
	before := revision(t, cli)
	resp := resend(t, cli, req)
	if after := revision(t, cli); after != before {
		t.Fatalf("revision after the copy: got %d, want %d (nothing written)", after, before)
	}
	return resp
}

// resend delivers a copy of req to etcd through cli, as a duplicated
// request would be.
func resend(t *testing.T, cli *clientv3.Client, req *pb.TxnRequest) *pb.TxnResponse {
	t.Helper()
	resp, err := pb.NewKVClient(cli.ActiveConnection()).Txn(t.Context(), req)
	if err != nil {
		t.Fatalf("copy's delivery: got %v, want nil", err)
	}
	return resp
}

// A copy of a Put delivered after a later Put of the same token is
// refused: it would otherwise replace the later write, as the floor does
// not fence a token against itself (TestLatePutAfterSameTokenWrite is the
// Put itself arriving late). The harness found this: a holder's second
// write, duplicated, landed after its third (seed 450971).
func TestSameTokenCopyRefused(t *testing.T) {
	t.Run("copy after the next write", func(t *testing.T) {
		s, direct, req := sameTokenCopy(t)
		wantRefusedBy(t, resendNoWrite(t, direct, req), 2)
		wantRecord(t, s, "k", 2, "v3")
	})
	t.Run("control: the copy without the compare of the floor's mod revision lands", func(t *testing.T) {
		s, direct, req := sameTokenCopy(t)
		resend(t, direct, withoutRevisionCompare(t, req))
		wantRecord(t, s, "k", 2, "v2")
	})
}

// wantRefusedBy fails the test unless resp is a write's refusal that read
// a floor of token: one operation, the Get of the floor.
func wantRefusedBy(t testing.TB, resp *pb.TxnResponse, token int64) {
	t.Helper()
	if len(resp.Responses) != 1 {
		t.Fatalf("the copy's reply: %d operations, want the refusal's Get of the floor alone", len(resp.Responses))
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 || string(kvs[0].Value) != fmt.Sprintf("%019d", token) {
		t.Fatalf("the refusal read the floor %v, want a floor of token %d", kvs, token)
	}
}

// withoutRevisionCompare returns req, a holder's repeated write, without its
// compare of the floor's mod revision: If(floor ≤ token) Then(write), as
// the write would be without it.
func withoutRevisionCompare(t testing.TB, req *pb.TxnRequest) *pb.TxnRequest {
	t.Helper()
	out := &pb.TxnRequest{Success: req.Success, Failure: req.Failure}
	for _, c := range req.Compare {
		if c.Target != pb.Compare_MOD {
			out.Compare = append(out.Compare, c)
		}
	}
	if len(out.Compare) != 1 || len(req.Compare) != 2 {
		t.Fatalf("the Put's request: got %v, want two compares, the floor's value and its mod revision", req)
	}
	return out
}

// sameTokenCopy returns a Store that put "k" with token 2 three times
// (v1, v2, v3), a client without faults, and the request of the v2 Put.
func sameTokenCopy(t *testing.T) (*etcdfence.Store, *clientv3.Client, *pb.TxnRequest) {
	t.Helper()
	fcli, in := faulty(t)
	s := mustNew(t, fcli, prefix(t))
	mustPut(t, s, "k", 2, "v1")
	sent := capture(in, s.DataKey("k"))
	mustPut(t, s, "k", 2, "v2")
	mustPut(t, s, "k", 2, "v3")
	return s, etcdClient(t), <-sent
}

// A Store that did not see a write of the same token (another process
// wrote with the token) has its first write turned back by the same-token
// compare; it sends it again past that write's revision, and it lands.
func TestSameTokenUnseenWriteSentAgain(t *testing.T) {
	a, b, in, _ := unseenWrite(t)
	mustPut(t, b, "k", 2, "from b")
	if got := in.Calls("KV/Txn"); got != 2 {
		t.Fatalf("transactions b sent: got %d, want 2 (turned back once, then written)", got)
	}
	wantRecord(t, a, "k", 2, "from b")
	mustPut(t, b, "k", 2, "again")
	if got := in.Calls("KV/Txn"); got != 3 {
		t.Fatalf("transactions b sent after its second Put: got %d, want 3 (b saw its own write)", got)
	}
	wantRecord(t, a, "k", 2, "again")
}

// A write that keeps finding the floor moved by writes of its token it did
// not see gives up after fence.UpdateAttempts, with fence.ErrConflict and
// nothing written.
func TestSameTokenUnseenWritesConflict(t *testing.T) {
	a, b, in, direct := unseenWrite(t)
	in.Before(putsKey(b.DataKey("k")), func(any) {
		if _, err := direct.Put(context.Background(), a.FloorKey("k"), "0000000000000000002"); err != nil {
			t.Error(err)
		}
	})
	err := b.Put(t.Context(), "k", 2, []byte("from b"))
	if !errors.Is(err, fence.ErrConflict) || errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put: got %v, want an error matching fence.ErrConflict alone", err)
	}
	if got := in.Calls("KV/Txn"); got != fence.UpdateAttempts {
		t.Fatalf("transactions sent: got %d, want %d", got, fence.UpdateAttempts)
	}
	wantRecord(t, a, "k", 2, "from a")
}

// unseenWrite returns two Stores of one prefix, b's requests through in,
// after a's Put of "k" with token 2, which b did not see; direct is a's
// client.
func unseenWrite(t *testing.T) (a, b *etcdfence.Store, in *reqfault.Injector, direct *clientv3.Client) {
	t.Helper()
	fcli, in := faulty(t)
	direct = etcdClient(t)
	p := prefix(t)
	a, b = mustNew(t, direct, p), mustNew(t, fcli, p)
	mustPut(t, a, "k", 2, "from a")
	return a, b, in, direct
}
