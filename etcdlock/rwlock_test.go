package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// TestReadersShare checks that readers hold together, that a writer waits
// for every one of them, and that its token is greater than theirs.
func TestReadersShare(t *testing.T) {
	cli := etcdClient(t)
	a, b, w := newLocker(t, cli), newLocker(t, cli), newLocker(t, cli)
	r1, err := a.RLock(t.Context(), "rw")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.RLock(t.Context(), "rw")
	if err != nil {
		t.Fatalf("second reader: got %v, want it to share the lock", err)
	}
	if _, err := w.TryLock(t.Context(), "rw"); !errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryLock beside readers: got %v, want ErrLocked", err)
	}
	q, err := w.Inspect(t.Context(), "rw")
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Holders) != 2 || !q.Holders[0].Shared || !q.Holders[1].Shared || len(q.Waiters) != 0 {
		t.Fatalf("Inspect: got holders %v waiters %v, want the two readers holding", q.Holders, q.Waiters)
	}
	got := make(chan *etcdlock.Lock, 1)
	go func() {
		l, err := w.Lock(context.Background(), "rw")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	poll.Until(t, "the writer queued", func() bool {
		q, err := w.Inspect(t.Context(), "rw")
		return err == nil && len(q.Waiters) == 1
	})
	if err := r1.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("the writer holds while a reader still does")
	case <-time.After(300 * time.Millisecond): // a writer that wrongly went ahead would by now
	}
	if err := r2.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	wl := <-got
	defer wl.Unlock(t.Context())
	if wl.Token() <= r1.Token() || wl.Token() <= r2.Token() {
		t.Fatalf("writer token %d, readers %d and %d: want the writer's greater", wl.Token(), r1.Token(), r2.Token())
	}
}

// TestWaitingWriterHoldsBackLaterReaders checks fairness: a reader that
// comes after a waiting writer waits for it.
func TestWaitingWriterHoldsBackLaterReaders(t *testing.T) {
	cli := etcdClient(t)
	a, w, b := newLocker(t, cli), newLocker(t, cli), newLocker(t, cli)
	r1, err := a.RLock(t.Context(), "fair")
	if err != nil {
		t.Fatal(err)
	}
	wgot := make(chan *etcdlock.Lock, 1)
	go func() {
		l, err := w.Lock(context.Background(), "fair")
		if err != nil {
			t.Error(err)
		}
		wgot <- l
	}()
	poll.Until(t, "the writer queued", func() bool {
		q, err := w.Inspect(t.Context(), "fair")
		return err == nil && len(q.Waiters) == 1
	})
	if _, err := b.TryRLock(t.Context(), "fair"); !errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryRLock behind a waiting writer: got %v, want ErrLocked", err)
	}
	rgot := make(chan *etcdlock.Lock, 1)
	go func() {
		l, err := b.RLock(context.Background(), "fair")
		if err != nil {
			t.Error(err)
		}
		rgot <- l
	}()
	poll.Until(t, "the later reader queued", func() bool {
		q, err := w.Inspect(t.Context(), "fair")
		return err == nil && len(q.Waiters) == 2
	})
	r1.Unlock(t.Context())
	wl := <-wgot
	select {
	case <-rgot:
		t.Fatal("the later reader holds beside the writer")
	case <-time.After(300 * time.Millisecond):
	}
	wl.Unlock(t.Context())
	r2 := <-rgot
	if r2.Token() <= wl.Token() {
		t.Fatalf("reader after writer: token %d, writer %d", r2.Token(), wl.Token())
	}
	r2.Unlock(t.Context())
}

// TestRWExclusion runs readers and writers on one name and checks, with
// counters the holders keep, that a writer never holds beside anyone.
func TestRWExclusion(t *testing.T) {
	cli := etcdClient(t)
	var readers, writers, maxReaders atomic.Int64
	var bad atomic.Value
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i := range 6 {
		c := newLocker(t, cli)
		wg.Go(func() {
			for range 15 {
				write := i%3 == 0
				var l *etcdlock.Lock
				var err error
				if write {
					l, err = c.Lock(ctx, "mix")
				} else {
					l, err = c.RLock(ctx, "mix")
				}
				if err != nil {
					t.Error(err)
					return
				}
				if write {
					if writers.Add(1) != 1 || readers.Load() != 0 {
						bad.Store("a writer beside another holder")
					}
					time.Sleep(time.Millisecond) // work under the lock
					writers.Add(-1)
				} else {
					n := readers.Add(1)
					if writers.Load() != 0 {
						bad.Store("a reader beside a writer")
					}
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					time.Sleep(5 * time.Millisecond)
					readers.Add(-1)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if maxReaders.Load() < 2 {
		t.Errorf("readers never shared the lock (at most %d at once)", maxReaders.Load())
	}
}

// TestBreakReader checks that Break frees one reader and refuses a waiter's token.
func TestBreakReader(t *testing.T) {
	cli := etcdClient(t)
	a, b, w := newLocker(t, cli), newLocker(t, cli), newLocker(t, cli)
	r1, _ := a.RLock(t.Context(), "br")
	r2, _ := b.RLock(t.Context(), "br")
	defer r1.Unlock(t.Context())
	if _, err := w.Break(t.Context(), "br", r2.Token()); err != nil {
		t.Fatalf("Break of the second reader: %v", err)
	}
	waitClosed(t, r2.Done(), 5*time.Second, "broken reader's Done")
	if !errors.Is(r2.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("broken reader's Err: got %v, want ErrKeyDeleted", r2.Err())
	}
	if _, err := w.Break(t.Context(), "br", r2.Token()); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("Break again: got %v, want ErrNotHolder", err)
	}
}

// TestSharedOption: Lock, TryLock, Do and LockAll given Shared take the
// lock as a reader, beside another reader, and a writer is kept out; a
// semaphore refuses it. Without the option each of them is kept out by the
// reader (the control).
func TestSharedOption(t *testing.T) {
	ctx := t.Context()
	cli := etcdClient(t)
	r, c, w := newLocker(t, cli), newLocker(t, cli), newLocker(t, cli)
	for _, name := range []string{"a", "b"} {
		l, err := r.RLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
	}
	try := func(name string, opts ...etcdlock.LockOption) error {
		l, err := c.TryLock(ctx, name, opts...)
		if err == nil {
			err = l.Unlock(ctx)
		}
		return err
	}
	if err := try("a", etcdlock.Shared()); err != nil {
		t.Errorf("TryLock(Shared) beside a reader: got %v, want the lock", err)
	}
	if err := try("a"); !errors.Is(err, etcdlock.ErrLocked) {
		t.Errorf("TryLock beside a reader (control): got %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l, err := c.Lock(short, "a", etcdlock.Shared())
	if err != nil {
		t.Fatalf("Lock(Shared) beside a reader: got %v, want the lock", err)
	}
	if !func() bool {
		e, err := c.Inspect(ctx, "a")
		return err == nil && len(e.Holders) == 2 && e.Holders[1].Shared
	}() {
		t.Error("Inspect: want two readers holding")
	}
	if _, err := w.TryLock(ctx, "a"); !errors.Is(err, etcdlock.ErrLocked) {
		t.Errorf("a writer's TryLock beside the two readers: got %v, want ErrLocked", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := c.Do(short, "a", func(context.Context, *etcdlock.Lock) error { ran = true; return nil }, etcdlock.Shared()); err != nil || !ran {
		t.Errorf("Do(Shared) beside a reader: got %v (ran %v), want it run", err, ran)
	}
	m, err := c.LockAll(short, []string{"a", "b"}, etcdlock.Shared())
	if err != nil {
		t.Fatalf("LockAll(Shared) beside readers of both: got %v, want both", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	quick, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := c.LockAll(quick, []string{"a", "b"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockAll beside readers (control): got %v, want it kept waiting", err)
	}
	sm, err := c.Semaphore("s", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sm.Acquire(ctx, etcdlock.Shared()); !errors.Is(err, etcdlock.ErrInvalidOption) {
		t.Errorf("Semaphore.Acquire(Shared): got %v, want ErrInvalidOption", err)
	}
}
