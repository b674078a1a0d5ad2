package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// TestInspectSemaphore reads a semaphore's permits, its holders with their
// slots and the tokens they fence with (Lock.Token), and its waiters,
// without being told the permits.
func TestInspectSemaphore(t *testing.T) {
	cli := etcdClient(t)
	var held []*etcdlock.Lock
	for _, owner := range []string{"a", "b"} {
		l, err := semaphore(t, newLocker(t, cli, etcdlock.WithOwner(owner)), "pool", 2).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		held = append(held, l)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		_, err := semaphore(t, newLocker(t, cli, etcdlock.WithOwner("c")), "pool", 2).Acquire(ctx)
		waiting <- err
	}()
	ops := newLocker(t, cli)
	var sq etcdlock.SemaphoreQueue
	poll.Until(t, "c queued", func() bool {
		var err error
		sq, err = ops.InspectSemaphore(t.Context(), "pool")
		return err == nil && len(sq.Waiters) == 1
	})
	if sq.Permits != 2 || len(sq.Holders) != 2 || sq.Holder == nil || sq.Waiters[0].Owner != "c" || sq.Waiters[0].Slot != -1 {
		t.Fatalf("InspectSemaphore: got %+v, want 2 permits, 2 holders, c waiting", sq)
	}
	for i, l := range held {
		h := sq.Holders[i]
		if h.Token != l.Token() || h.Slot != l.Slot() || h.TTL < 0 {
			t.Errorf("holder %d: got token %d slot %d TTL %v, want token %d slot %d and a TTL", i, h.Token, h.Slot, h.TTL, l.Token(), l.Slot())
		}
	}
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("c's Acquire: got %v, want cancelled", err)
	}
	if sq, err := ops.InspectSemaphore(t.Context(), "nobody"); err != nil || sq.Permits != 0 || sq.Holder != nil {
		t.Fatalf("InspectSemaphore of an unused name: got %+v, %v", sq, err)
	}
	if _, err := ops.InspectSemaphore(t.Context(), "a\nb"); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Fatalf("InspectSemaphore(a/b): got %v, want ErrInvalidName", err)
	}
}

// TestBreakSemaphore frees a stuck permit by its token: the holder learns
// it lost the permit, the next acquisition gets its slot with a greater
// token, and a break with a wrong token, or repeated late, frees nothing.
func TestBreakSemaphore(t *testing.T) {
	cli := etcdClient(t)
	stuck, err := semaphore(t, newLocker(t, cli, etcdlock.WithOwner("stuck")), "one", 1).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ops := newLocker(t, cli)
	if _, err := ops.BreakSemaphore(t.Context(), "one", stuck.Token()+1); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("break with a wrong token: got %v, want ErrNotHolder", err)
	}
	if _, err := ops.BreakSemaphore(t.Context(), "one", 0); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("break with token 0: got %v, want ErrInvalidToken", err)
	}
	if stuck.Err() != nil {
		t.Fatalf("after refused breaks: Err %v, want the permit held", stuck.Err())
	}
	e, err := ops.BreakSemaphore(t.Context(), "one", stuck.Token())
	if err != nil || e.Owner != "stuck" || e.Slot != 0 || e.Token != stuck.Token() {
		t.Fatalf("break: got %+v, %v; want stuck's permit, slot 0", e, err)
	}
	waitClosed(t, stuck.Done(), 5*time.Second, "broken holder's Done")
	if !errors.Is(stuck.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("broken holder: Err %v, want ErrKeyDeleted", stuck.Err())
	}
	// The broken holder does not release (it is stuck): no Unlock.
	next, err := semaphore(t, newLocker(t, cli), "one", 1).TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("TryAcquire after the break: %v", err)
	}
	defer next.Unlock(context.Background())
	if next.Slot() != 0 || next.Token() <= stuck.Token() {
		t.Fatalf("next holder: slot %d token %d, want slot 0 and a token above %d", next.Slot(), next.Token(), stuck.Token())
	}
	if _, err := ops.BreakSemaphore(t.Context(), "one", stuck.Token()); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("the break repeated late: got %v, want ErrNotHolder", err)
	}
	if next.Err() != nil {
		t.Fatalf("next holder after the late break: Err %v, want held", next.Err())
	}
}

// TestBreakSemaphoreNeedsBothKeys is BreakSemaphore's control: deleting
// only the stuck holder's slot key leaves its place among the permits,
// only its queue key leaves the slot taken; either way no one else gets
// the permit while the stuck holder's lease lives.
func TestBreakSemaphoreNeedsBothKeys(t *testing.T) {
	for _, tt := range []struct {
		name   string
		delete func(t *testing.T, sq etcdlock.SemaphoreQueue) string
	}{
		{"slot key only", func(t *testing.T, _ etcdlock.SemaphoreQueue) string { return keysOf(t).Permit("one", 0) }},
		{"queue key only", func(_ *testing.T, sq etcdlock.SemaphoreQueue) string { return sq.Holder.Key }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cli := etcdClient(t)
			stuck, err := semaphore(t, newLocker(t, cli), "one", 1).Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			sq, err := newLocker(t, cli).InspectSemaphore(t.Context(), "one")
			if err != nil || sq.Holder == nil {
				t.Fatalf("InspectSemaphore: %+v, %v", sq, err)
			}
			key := tt.delete(t, sq)
			if _, err := cli.Delete(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			l, err := semaphore(t, newLocker(t, cli), "one", 1).TryAcquire(ctx)
			if err == nil {
				l.Unlock(context.Background())
				t.Fatal("acquired while the stuck holder's lease lives, want refused or waiting")
			}
			if !errors.Is(err, etcdlock.ErrLocked) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryAcquire: got %v, want ErrLocked or still waiting at the deadline", err)
			}
			stuck.Unlock(context.Background())
		})
	}
}

// BreakSemaphore's transaction arriving late (after the holder released
// and its Client took the permit again, reusing the same queue key and
// slot), arriving twice, or losing its reply never frees a later permit:
// it compares the create revisions of both keys.
func TestBreakSemaphoreLateTwiceLostReply(t *testing.T) {
	direct := etcdClient(t)
	holder := semaphore(t, newLocker(t, direct), "one", 1)
	fcli, in := faulty(t, 25)
	op := newLocker(t, fcli)
	slotKey := keysOf(t).Permit("one", 0)
	acquire := func(t *testing.T) *etcdlock.Lock {
		t.Helper()
		l, err := holder.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// again is the holder's next permit, on the keys of the first.
	again := func(t *testing.T, first *etcdlock.Lock) *etcdlock.Lock {
		t.Helper()
		l := acquire(t)
		if l.Key() != first.Key() || l.Slot() != first.Slot() {
			t.Fatalf("the later permit has key %q slot %d, not the first's %q slot %d: the case is not exercised", l.Key(), l.Slot(), first.Key(), first.Slot())
		}
		return l
	}
	stillHeld := func(t *testing.T, l *etcdlock.Lock) {
		t.Helper()
		sq, err := op.InspectSemaphore(t.Context(), "one")
		if err != nil || sq.Holder == nil || sq.Holder.Key != l.Key() || sq.Holder.Token != l.Token() || l.Err() != nil {
			t.Fatalf("semaphore: %+v (%v), lock Err %v; want the permit of token %d held", sq, err, l.Err(), l.Token())
		}
	}

	t.Run("late", func(t *testing.T) {
		first := acquire(t)
		held := in.Hold(deletes(slotKey))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := op.BreakSemaphore(ctx, "one", first.Token())
		cancel()
		if err == nil {
			t.Fatal("BreakSemaphore whose delete was held: got nil, want an error")
		}
		<-held.Caught()
		if err := first.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		l := again(t, first)
		defer l.Unlock(context.Background())
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("delivering the late delete: %v", err)
		}
		stillHeld(t, l)
	})

	t.Run("twice", func(t *testing.T) {
		first := acquire(t)
		var dup atomic.Pointer[pb.TxnRequest]
		in.Before(deletes(slotKey), func(req any) { dup.Store(req.(*pb.TxnRequest)) })
		defer in.Heal()
		if _, err := op.BreakSemaphore(t.Context(), "one", first.Token()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, first.Done(), 2*time.Second, "broken permit's Done")
		if err := first.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("Unlock of the broken permit: got %v, want ErrLost", err)
		}
		l := again(t, first)
		defer l.Unlock(context.Background())
		if _, err := pb.NewKVClient(direct.ActiveConnection()).Txn(t.Context(), dup.Load()); err != nil {
			t.Fatalf("delivering the break again: %v", err)
		}
		stillHeld(t, l)
	})

	t.Run("lost reply", func(t *testing.T) {
		first := acquire(t)
		in.Next(deletes(slotKey), reqfault.LostReply)
		if _, err := op.BreakSemaphore(t.Context(), "one", first.Token()); err == nil {
			t.Fatal("BreakSemaphore whose reply was lost: got nil, want an error")
		}
		waitClosed(t, first.Done(), 2*time.Second, "Done of the permit whose break landed unseen")
		if err := first.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("Unlock of the broken permit: got %v, want ErrLost", err)
		}
		l := again(t, first)
		defer l.Unlock(context.Background())
		if _, err := op.BreakSemaphore(t.Context(), "one", first.Token()); !errors.Is(err, etcdlock.ErrNotHolder) {
			t.Fatalf("the retried break: got %v, want ErrNotHolder", err)
		}
		stillHeld(t, l)
	})
}
