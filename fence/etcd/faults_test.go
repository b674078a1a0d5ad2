package etcdfence_test

import (
	"context"
	"errors"
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

	held := in.Hold(putsKey(old.DataKey(k)))
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() { got <- old.Put(ctx, k, 2, []byte("v2 late")) }()
	<-held.Caught()
	cancel()
	fencewant.Unknown(t, <-got, 2, etcdfence.ErrValueTooLarge)

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

// A Put delivered twice is harmless: a copy that arrives with nothing newer
// written writes the same floor and record again, and a copy that arrives
// after a newer token's Put is refused.
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
		before := revision(t, direct)
		if resp := resend(t, direct, <-sent); !resp.Succeeded {
			t.Fatal("copy of the token-2 Put after token 3: took the write branch, want the refusal")
		}
		wantRecord(t, s, "k", 3, "v3")
		if after := revision(t, direct); after != before {
			t.Fatalf("revision after the copy: got %d, want %d (nothing written)", after, before)
		}
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
