package etcdlock_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// Edge cases of the semaphore and LockAll found by trying to break them.

// TestTryAcquireSlotsTaken checks that TryAcquire answers at once when
// every slot is held, also by a holder whose queue key someone deleted
// (etcdctl del): that holder keeps its slot's key, so the queue shows a
// free permit that is not. TryAcquire used to wait in the claim for a slot
// to be freed, until its context ended.
func TestTryAcquireSlotsTaken(t *testing.T) {
	cli := etcdClient(t)
	h, err := semaphore(t, newLocker(t, cli), "ghost", 1).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(t.Context())
	if _, err := cli.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = semaphore(t, newLocker(t, cli), "ghost", 1).TryAcquire(ctx)
	if !errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryAcquire with the only slot held: got %v after %v, want ErrLocked at once", err, time.Since(start).Round(time.Millisecond))
	}
	var le *etcdlock.LockedError
	if !errors.As(err, &le) || le.Holder.Slot != h.Slot() || le.Holder.Token != h.Token() || le.Holder.Lease != h.Lease() {
		t.Errorf("TryAcquire's holder: got %+v, want slot %d, token %d, lease %x (the holder's)", le, h.Slot(), h.Token(), h.Lease())
	}
	if ks := keys(t, cli, keysOf(t).SemaphoreQueue("ghost")); len(ks) != 0 {
		t.Fatalf("queue keys left by TryAcquire: %v", ks)
	}
}

// TestLockAllLostWhileWaiting checks that LockAll never returns a
// MultiLock one of whose locks it already knows lost: here the key of the
// first name is deleted (etcdctl del) while LockAll waits for the second.
// It used to return the MultiLock, held in part, with a nil error.
func TestLockAllLostWhileWaiting(t *testing.T) {
	cli := etcdClient(t)
	other := mustLock(t, newLocker(t, cli), "b")
	logs := &syncBuffer{}
	c := newLocker(t, cli, etcdlock.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	type result struct {
		m   *etcdlock.MultiLock
		err error
	}
	got := make(chan result, 1)
	go func() {
		m, err := c.LockAll(context.Background(), []string{"a", "b"})
		got <- result{m, err}
	}()
	var aKey string
	poll.Until(t, "LockAll holding a and waiting for b", func() bool {
		q, err := c.Inspect(t.Context(), "a")
		if err != nil || q.Holder == nil {
			return false
		}
		aKey = q.Holder.Key
		q, err = c.Inspect(t.Context(), "b")
		return err == nil && len(q.Waiters) == 1
	})
	if _, err := cli.Delete(t.Context(), aKey); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "LockAll's lock of a noticing its loss", func() bool {
		return slices.ContainsFunc(logs.lines(), func(m map[string]any) bool { return m["msg"] == "etcdlock: lost" })
	})
	if err := other.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err == nil {
		a := r.m.Lock("a")
		r.m.Unlock(t.Context())
		t.Fatalf("LockAll returned a MultiLock whose lock of a had ended (%v), want an error", a.Err())
	}
	if !errors.Is(r.err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("LockAll: got %v, want ErrKeyDeleted (a's)", r.err)
	}
	poll.Until(t, "no key left", func() bool { return len(keys(t, cli, keysOf(t).Locks())) == 0 })
}

// TestSemaphoreUnlockAfterSlotTaken checks that Unlock tells a holder
// whose permit slot key someone deleted (etcdctl del) that it had lost the
// permit, also when it had not noticed yet (here: no key watch), as
// Unlock does for a lock whose key was deleted. Its release compared only
// its queue key, still there, and reported a hold kept throughout.
func TestSemaphoreUnlockAfterSlotTaken(t *testing.T) {
	cli := etcdClient(t)
	sm := semaphore(t, newLocker(t, cli), "taken", 2)
	l, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(t.Context(), keysOf(t).Permit("taken", l.Slot())); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Unlock after the slot key was deleted: got %v, want ErrKeyDeleted", err)
	}
	if !errors.Is(l.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", l.Err())
	}
	if ks := keys(t, cli, keysOf(t).Semaphores()); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
	// The control: a holder whose slot is its own is told so.
	l, err = sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil || !errors.Is(l.Err(), etcdlock.ErrUnlocked) {
		t.Fatalf("Unlock of a held permit: got %v (Err %v), want nil (ErrUnlocked)", err, l.Err())
	}
}

// TestSemaphorePermitsDisagreeWithSlot checks that a caller with other
// permits is refused also when the queue shows no one (the holder's queue
// key was deleted, etcdctl del, and it keeps its slot's key): the claim
// reads the permits from the slot's key, and no slot beyond the holder's
// count is taken.
func TestSemaphorePermitsDisagreeWithSlot(t *testing.T) {
	cli := etcdClient(t)
	h, err := semaphore(t, newLocker(t, cli), "mix", 1).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(t.Context())
	if _, err := cli.Delete(t.Context(), h.Key()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := semaphore(t, newLocker(t, cli), "mix", 2).Acquire(ctx); !errors.Is(err, etcdlock.ErrPermits) {
		t.Fatalf("Acquire with 2 permits beside a slot held with 1: got %v, want ErrPermits", err)
	}
	if ks := keys(t, cli, keysOf(t).Semaphore("mix")); len(ks) != 1 {
		t.Fatalf("keys: %v, want only the holder's slot key", ks)
	}
}
