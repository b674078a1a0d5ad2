package etcdlock_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

func TestBreak(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli, etcdlock.WithOwner("stuck"))
	op := newLocker(t, cli)
	l := mustLock(t, a, "stuck-job")
	if _, err := op.Break(t.Context(), "stuck-job", l.Token()+1); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("Break with a wrong token: got %v, want ErrNotHolder", err)
	}
	if _, err := op.Break(t.Context(), "stuck-job", 0); err == nil {
		t.Fatal("Break with token 0: got nil error")
	}
	if l.Err() != nil {
		t.Fatalf("after refused Breaks: lock Err %v, want nil (held)", l.Err())
	}
	e, err := op.Break(t.Context(), "stuck-job", l.Token())
	if err != nil || e.Token != l.Token() || e.Owner != "stuck" {
		t.Fatalf("Break: got %#v, %v; want the holder's entry", e, err)
	}
	waitClosed(t, l.Done(), 2*time.Second, "broken lock's Done")
	if !errors.Is(l.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("broken lock's Err: got %v, want ErrKeyDeleted", l.Err())
	}
	if _, err := op.Break(t.Context(), "stuck-job", l.Token()); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("second Break: got %v, want ErrNotHolder", err)
	}
	next := mustLock(t, op, "stuck-job")
	defer next.Unlock(t.Context())
	if next.Token() <= l.Token() {
		t.Fatalf("next token %d, want > %d", next.Token(), l.Token())
	}
}

func TestListLocksAndElections(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	for _, n := range []string{"b", "a"} {
		l := mustLock(t, c, n)
		defer l.Unlock(t.Context())
	}
	term := mustCampaign(t, c, "leader", "")
	defer term.Resign(t.Context())
	locks, err := c.ListLocks(t.Context())
	if err != nil || !slices.Equal(locks, []string{"a", "b"}) {
		t.Fatalf("ListLocks: got %v, %v; want [a b]", locks, err)
	}
	elections, err := c.ListElections(t.Context())
	if err != nil || !slices.Equal(elections, []string{"leader"}) {
		t.Fatalf("ListElections: got %v, %v; want [leader]", elections, err)
	}
}

// Break's delete arriving late (after the holder released and its Client
// took the lock again, reusing the same key), arriving twice, or losing its
// reply never removes a later acquisition: it compares the key's create
// revision with the broken token.
func TestBreakLateTwiceLostReply(t *testing.T) {
	direct := etcdClient(t)
	holder := newLocker(t, direct)
	fcli, in := faulty(t, 11)
	op := newLocker(t, fcli)

	t.Run("late", func(t *testing.T) {
		first := mustLock(t, holder, "late")
		held := in.Hold(deletes(first.Key()))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := op.Break(ctx, "late", first.Token())
		cancel()
		if err == nil {
			t.Fatal("Break whose delete was held: got nil, want an error")
		}
		<-held.Caught()
		if err := first.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		again := mustLock(t, holder, "late")
		defer again.Unlock(t.Context())
		if again.Key() != first.Key() {
			t.Fatalf("the later acquisition uses key %q, not the broken one's %q: the case is not exercised", again.Key(), first.Key())
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("delivering the late delete: %v", err)
		}
		assertStillHeld(t, direct, again)
	})

	t.Run("twice", func(t *testing.T) {
		first := mustLock(t, holder, "twice")
		var dup atomic.Pointer[pb.TxnRequest]
		in.Before(deletes(first.Key()), func(req any) { dup.Store(req.(*pb.TxnRequest)) })
		defer in.Heal()
		if _, err := op.Break(t.Context(), "twice", first.Token()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, first.Done(), 2*time.Second, "broken lock's Done")
		if err := first.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrLost) { // frees the slot: the key is reused
			t.Fatalf("Unlock of the broken lock: got %v, want ErrLost", err)
		}
		again := mustLock(t, holder, "twice")
		defer again.Unlock(t.Context())
		if again.Key() != first.Key() {
			t.Fatalf("the later acquisition uses key %q, not the broken one's %q", again.Key(), first.Key())
		}
		// The same request, delivered again.
		if _, err := pb.NewKVClient(direct.ActiveConnection()).Txn(t.Context(), dup.Load()); err != nil {
			t.Fatalf("delivering the Break's delete again: %v", err)
		}
		assertStillHeld(t, direct, again)
	})

	t.Run("lost reply", func(t *testing.T) {
		first := mustLock(t, holder, "lost")
		in.Next(deletes(first.Key()), reqfault.LostReply)
		if _, err := op.Break(t.Context(), "lost", first.Token()); err == nil {
			t.Fatal("Break whose reply was lost: got nil, want an error")
		}
		waitClosed(t, first.Done(), 2*time.Second, "Done of the lock whose Break landed unseen")
		if err := first.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("Unlock of the broken lock: got %v, want ErrLost", err)
		}
		again := mustLock(t, holder, "lost")
		defer again.Unlock(t.Context())
		if again.Key() != first.Key() {
			t.Fatalf("the later acquisition uses key %q, not the broken one's %q", again.Key(), first.Key())
		}
		if _, err := op.Break(t.Context(), "lost", first.Token()); !errors.Is(err, etcdlock.ErrNotHolder) {
			t.Fatalf("the retried Break: got %v, want ErrNotHolder", err)
		}
		assertStillHeld(t, direct, again)
	})
}

// assertStillHeld fails unless l is held and its key is in etcd with l's
// token.
func assertStillHeld(t *testing.T, cli *clientv3.Client, l *etcdlock.Lock) {
	t.Helper()
	resp, err := cli.Get(t.Context(), l.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != int64(l.Token()) {
		t.Fatalf("key %q: got %v (%v), want it with create revision %d", l.Key(), resp.Kvs, err, l.Token())
	}
	if l.Err() != nil {
		t.Fatalf("lock %d: Err %v, want held", l.Token(), l.Err())
	}
}
