package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// gateLeaseLookups holds every lease lookup (TimeToLive, which names the
// cause of a watched key's deletion) until the returned open is called or
// the lookup's own context ends; looked reports whether any lookup has gone
// on, either way.
func gateLeaseLookups(in *reqfault.Injector) (open func(), looked func() bool) {
	gate := make(chan struct{})
	var passed atomic.Bool
	in.BeforeContext(reqfault.Method("Lease/LeaseTimeToLive"), func(ctx context.Context, _ any) {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		passed.Store(true)
	})
	return func() { close(gate) }, passed.Load
}

// Done closes as soon as the key watch sees the key deleted, not after the
// lease lookup that tells why: a lock, Do's context and a MultiLock all end
// while that lookup is held, and the cause, read then, waits for it and is
// right. Before, Done stayed open until the lookup returned (or its second
// ran out, and then a revoke was reported as ErrKeyDeleted).
func TestDoneClosesBeforeLeaseLookup(t *testing.T) {
	t.Run("broken", func(t *testing.T) {
		fcli, in := faulty(t, 41)
		c := newLocker(t, fcli)
		admin := newLocker(t, etcdClient(t))
		l := mustLock(t, c, "lookup-lock")
		m, err := c.LockAll(t.Context(), []string{"lookup-all-a", "lookup-all-b"})
		if err != nil {
			t.Fatal(err)
		}
		inDo := make(chan *etcdlock.Lock)
		doEnded := make(chan error, 1)
		go func() {
			doEnded <- c.Do(context.Background(), "lookup-do", func(ctx context.Context, dl *etcdlock.Lock) error {
				inDo <- dl
				<-ctx.Done()
				return context.Cause(ctx)
			})
		}()
		dl := <-inDo
		poll.Until(t, "the key watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 4 && ok })
		open, looked := gateLeaseLookups(in)
		for _, b := range []*etcdlock.Lock{l, m.Locks()[0], dl} {
			if _, err := admin.Break(t.Context(), b.Name(), b.Token()); err != nil {
				t.Fatal(err)
			}
		}
		waitClosed(t, l.Done(), 5*time.Second, "the lock's Done")
		waitClosed(t, m.Done(), 5*time.Second, "the MultiLock's Done")
		waitClosed(t, dl.Done(), 5*time.Second, "Do's lock's Done")
		if looked() {
			t.Fatal("Done closed only after a lease lookup went on; want before")
		}
		open()
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) || !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("Err: got %v, want ErrLost and ErrKeyDeleted", err)
		}
		if err := m.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("MultiLock.Err: got %v, want ErrKeyDeleted", err)
		}
		if err := <-doEnded; !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("Do: got %v, want ErrKeyDeleted", err)
		}
		t.Logf("Err: %v; MultiLock.Err: %v", l.Err(), m.Err())
	})
	t.Run("revoked", func(t *testing.T) {
		fcli, in := faulty(t, 42)
		c := newLocker(t, fcli)
		l := mustLock(t, c, "lookup-revoked")
		poll.Until(t, "the key watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
		open, looked := gateLeaseLookups(in)
		if _, err := etcdClient(t).Revoke(t.Context(), l.Lease()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 5*time.Second, "Done after the revoke")
		if looked() {
			t.Fatal("Done closed only after the lease lookup went on; want before")
		}
		got := make(chan error, 1)
		go func() { got <- l.Err() }() // read while the lookup is held: it waits for the cause
		open()
		if err := <-got; !errors.Is(err, etcdlock.ErrLeaseExpired) || !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("Err: got %v, want ErrLost and ErrLeaseExpired", err)
		}
	})
}
