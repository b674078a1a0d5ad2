package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

func semaphore(t *testing.T, c *etcdlock.Client, name string, n int) *etcdlock.Semaphore {
	t.Helper()
	sm, err := c.Semaphore(name, n)
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

// TestSemaphorePermits checks that n holders hold at once, each on its own
// slot, that the next waits, and that a slot's tokens increase.
func TestSemaphorePermits(t *testing.T) {
	cli := etcdClient(t)
	var held []*etcdlock.Lock
	slots := map[int]bool{}
	for range 3 {
		l, err := semaphore(t, newLocker(t, cli), "pool", 3).Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if slots[l.Slot()] || l.Slot() < 0 || l.Slot() >= 3 {
			t.Fatalf("slot %d: taken already or out of range (have %v)", l.Slot(), slots)
		}
		slots[l.Slot()] = true
		held = append(held, l)
	}
	fourth := semaphore(t, newLocker(t, cli), "pool", 3)
	if _, err := fourth.TryAcquire(t.Context()); !errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryAcquire with every permit held: got %v, want ErrLocked", err)
	}
	q, err := fourth.Inspect(t.Context())
	if err != nil || len(q.Holders) != 3 {
		t.Fatalf("Inspect: got %+v, %v, want 3 holders", q, err)
	}
	got := make(chan *etcdlock.Lock, 1)
	go func() {
		l, err := fourth.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("a fourth holder with 3 permits")
	case <-time.After(300 * time.Millisecond):
	}
	freed := held[1]
	if err := freed.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	defer l.Unlock(t.Context())
	if l.Slot() != freed.Slot() || l.Token() <= freed.Token() {
		t.Fatalf("new holder: slot %d token %d; freed slot %d token %d: want the freed slot with a greater token",
			l.Slot(), l.Token(), freed.Slot(), freed.Token())
	}
	resp, err := cli.Txn(t.Context()).If(l.Held()).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("Held of the new holder: %v %v, want it to hold", resp, err)
	}
	resp, err = cli.Txn(t.Context()).If(freed.Held()).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("Held of the released holder: %v %v, want it not to hold", resp, err)
	}
	for _, h := range []*etcdlock.Lock{held[0], held[2]} {
		h.Unlock(t.Context())
	}
}

// TestSemaphorePermitsDisagree checks that callers giving another number
// of permits for one name get ErrPermits.
func TestSemaphorePermitsDisagree(t *testing.T) {
	cli := etcdClient(t)
	l, err := semaphore(t, newLocker(t, cli), "n", 2).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	other := newLocker(t, cli)
	if _, err := semaphore(t, other, "n", 3).Acquire(t.Context()); !errors.Is(err, etcdlock.ErrPermits) {
		t.Fatalf("Acquire with 3 permits beside 2: got %v, want ErrPermits", err)
	}
	if ks := keys(t, cli, keysOf(t).SemaphoreQueue("n")); len(ks) != 1 {
		t.Fatalf("queue after the refused acquisition: %v, want only the holder's key", ks)
	}
}

// TestSemaphoreBounds runs many acquisitions of a 3-permit semaphore and
// checks, from counters the holders keep and from the slots, that never
// more than 3 hold at once, never two on one slot.
func TestSemaphoreBounds(t *testing.T) {
	cli := etcdClient(t)
	const permits = 3
	var holding, most atomic.Int64
	var slotUsed [permits]atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for range 8 {
		sm := semaphore(t, newLocker(t, cli), "bounds", permits)
		wg.Go(func() {
			for range 10 {
				l, err := sm.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if slotUsed[l.Slot()].Add(1) != 1 {
					t.Errorf("two holders on slot %d", l.Slot())
				}
				time.Sleep(2 * time.Millisecond) // work under the permit
				slotUsed[l.Slot()].Add(-1)
				holding.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > permits || m < 2 {
		t.Fatalf("at most %d held at once, want 2 to %d", m, permits)
	}
	if ks := keys(t, cli, keysOf(t).Semaphores()); len(ks) != 0 {
		t.Fatalf("keys left: %v", ks)
	}
}

// TestSemaphoreSlotFencing shows a slot's tokens fencing a resource owned
// by the slot: a deposed holder of slot 0 is refused once the next holder
// of slot 0 wrote; with one floor across slots, an innocent holder of
// another slot would be refused too (the control).
func TestSemaphoreSlotFencing(t *testing.T) {
	cli := etcdClient(t)
	a := semaphore(t, newLocker(t, cli), "shards", 2)
	b := semaphore(t, newLocker(t, cli), "shards", 2)
	la, err := a.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	store := fence.NewMemoryStore()
	shard := func(l *etcdlock.Lock) string { return []string{"shard-0", "shard-1"}[l.Slot()] }
	for _, l := range []*etcdlock.Lock{la, lb} {
		if err := store.Put(t.Context(), shard(l), l.Token(), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// The control: one floor for both shards refuses the older, innocent holder.
	shared := fence.NewMemoryStore()
	older, newer := la, lb
	if older.Token() > newer.Token() {
		older, newer = newer, older
	}
	shared.Put(t.Context(), "all", newer.Token(), []byte("v"))
	if err := shared.Put(t.Context(), "all", older.Token(), []byte("v")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("control: one floor across slots: got %v, want the innocent holder refused", err)
	}
	// la is deposed (its key deleted, as a lease expiry would), and a new
	// holder takes its slot.
	if _, err := cli.Delete(t.Context(), keysOf(t).Permit("shards", la.Slot())); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, la.Done(), 5*time.Second, "deposed holder's Done")
	la.Unlock(t.Context())
	c := semaphore(t, newLocker(t, cli), "shards", 2)
	lc, err := c.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Unlock(t.Context())
	if lc.Slot() != la.Slot() || lc.Token() <= la.Token() {
		t.Fatalf("new holder slot %d token %d, deposed slot %d token %d", lc.Slot(), lc.Token(), la.Slot(), la.Token())
	}
	if err := store.Put(t.Context(), shard(lc), lc.Token(), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), shard(la), la.Token(), []byte("late")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("deposed holder's late write: got %v, want ErrStale", err)
	}
	if err := store.Put(t.Context(), shard(lb), lb.Token(), []byte("still")); err != nil {
		t.Fatalf("the other slot's holder: got %v, want accepted", err)
	}
	lb.Unlock(t.Context())
}

func TestSemaphoreInvalid(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	for _, n := range []int{0, -1, etcdlock.MaxPermits + 1} {
		if _, err := c.Semaphore("x", n); !errors.Is(err, etcdlock.ErrInvalidArgument) {
			t.Errorf("Semaphore(x, %d): got %v, want ErrInvalidArgument", n, err)
		}
	}
	if _, err := c.Semaphore("", 2); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Errorf("Semaphore with an empty name: got %v", err)
	}
	sm, _ := c.Semaphore("x", 2)
	//lint:ignore SA1012 the nil context is the test
	if _, err := sm.Acquire(nil); !errors.Is(err, etcdlock.ErrInvalidArgument) {
		t.Errorf("Acquire(nil): got %v", err)
	}
}

// TestTryAcquireNamesPermitToken checks that a refused TryAcquire names the
// holder by the token it fences with (its permit's), as Inspect does.
func TestTryAcquireNamesPermitToken(t *testing.T) {
	cli := etcdClient(t)
	l, err := semaphore(t, newLocker(t, cli), "named", 1).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	_, err = semaphore(t, newLocker(t, cli), "named", 1).TryAcquire(t.Context())
	var le *etcdlock.LockedError
	if !errors.As(err, &le) || le.Holder.Token != l.Token() || le.Holder.Slot != l.Slot() {
		t.Fatalf("TryAcquire: got %v (holder %+v), want the holder named with token %d, slot %d", err, le, l.Token(), l.Slot())
	}
}

// A full semaphore's TryAcquire lists every permit's holder, each by the
// token it fences with and its slot, not one holder as a mutex's would;
// so does a TryLock that meets readers sharing a lock.
func TestLockedErrorListsHolders(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	a := newLocker(t, cli, etcdlock.WithOwner("w1"))
	b := newLocker(t, cli, etcdlock.WithOwner("w2"))
	la, err := semaphore(t, a, "pool", 2).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lb, err := semaphore(t, b, "pool", 2).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = semaphore(t, newLocker(t, cli), "pool", 2).TryAcquire(t.Context())
	var le *etcdlock.LockedError
	if !errors.As(err, &le) || len(le.Holders) != 2 || le.Holder != le.Holders[0] {
		t.Fatalf("TryAcquire of a full semaphore: %v (%+v), want both holders", err, le)
	}
	for i, l := range []*etcdlock.Lock{la, lb} {
		if h := le.Holders[i]; h.Token != l.Token() || h.Slot != l.Slot() {
			t.Errorf("holder %d: %+v, want token %d slot %d", i, h, l.Token(), l.Slot())
		}
	}
	msg := err.Error()
	for _, want := range []string{`"pool" locked by 2 holders`, fmt.Sprintf("w1 (token %d, slot %d)", la.Token(), la.Slot()), fmt.Sprintf("w2 (token %d, slot %d)", lb.Token(), lb.Slot())} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	r1, err := a.RLock(t.Context(), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.RLock(t.Context(), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	_, err = newLocker(t, cli).TryLock(t.Context(), "cfg")
	if !errors.As(err, &le) || len(le.Holders) != 2 || le.Holders[0].Token != r1.Token() || le.Holders[1].Token != r2.Token() || !le.Holders[1].Shared {
		t.Errorf("TryLock of a lock two readers share: %v (%+v), want both readers", err, le)
	}
	// A mutex's one holder reads as it did.
	if _, err := a.Lock(t.Context(), "solo"); err != nil {
		t.Fatal(err)
	}
	_, err = newLocker(t, cli).TryLock(t.Context(), "solo")
	if !errors.As(err, &le) || len(le.Holders) != 1 || strings.Contains(err.Error(), "holders") || !strings.Contains(err.Error(), `"solo" locked by w1 (token`) {
		t.Errorf("TryLock of a held mutex: %v (%+v)", err, le)
	}
}

// More readers than a LockedError lists: it says there are more, not a
// count that is false; exactly as many as it lists: it counts them.
func TestLockedErrorSaysMore(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	a := newLocker(t, cli)
	for _, tt := range []struct {
		readers int
		more    bool
		says    string
	}{
		{20, true, "locked by more than 16 holders, the first 16: "},
		{16, false, "locked by 16 holders: "},
	} {
		name := fmt.Sprintf("wide-%d", tt.readers)
		for range tt.readers {
			if _, err := a.RLock(t.Context(), name); err != nil {
				t.Fatal(err)
			}
		}
		_, err := newLocker(t, cli).TryLock(t.Context(), name)
		var le *etcdlock.LockedError
		if !errors.As(err, &le) || len(le.Holders) != 16 || le.More != tt.more || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("TryLock of a lock %d readers share: %v, want 16 holders listed, More %v, %q", tt.readers, err, tt.more, tt.says)
		}
	}
}
