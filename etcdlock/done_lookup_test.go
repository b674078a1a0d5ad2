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
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// gateLeaseLookups holds every lease lookup (TimeToLive, which names the
// cause of a watched key's deletion) until the returned open is called or
// the lookup's own context ends; looked reports whether any lookup has gone
// on, either way. open may be called more than once.
func gateLeaseLookups(in *reqfault.Injector) (open func(), looked func() bool) {
	open, looked, _ = gateLeaseLookupsWhy(in)
	return open, looked
}

// gateLeaseLookupsWhy is gateLeaseLookups, and ended returns how the last
// lookup held ended: nil when opened, else its context's error.
func gateLeaseLookupsWhy(in *reqfault.Injector) (open func(), looked func() bool, ended func() error) {
	gate := make(chan struct{})
	var passed atomic.Bool
	var why atomic.Pointer[error]
	in.BeforeContext(reqfault.Method("Lease/LeaseTimeToLive"), func(ctx context.Context, _ any) {
		var err error
		select {
		case <-gate:
		case <-ctx.Done():
			err = ctx.Err()
		}
		why.Store(&err)
		passed.Store(true)
	})
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }, passed.Load, func() error {
		if p := why.Load(); p != nil {
			return *p
		}
		return nil
	}
}

// The lookup is held while a program reacts to the loss: none of Unlock,
// Do's return and Close waits for it, and a Close then does not change the
// cause. Before, Unlock and Do read or formatted the cause (waiting out the
// lookup's second, past Unlock's context), Close waited for a lookup
// running on no context of the Client's, and the Close's revoke turned the
// cause into "client closed".
func TestLossReactionsDoNotWaitForLeaseLookup(t *testing.T) {
	for _, traced := range []bool{false, true} { // traced: Unlock records its error on its span
		t.Run(map[bool]string{false: "Unlock", true: "Unlock, traced"}[traced], func(t *testing.T) {
			fcli, in := faulty(t, 61)
			var opts []etcdlock.Option
			if traced {
				_, opts = withTelemetry(t)
			}
			c := newLocker(t, fcli, opts...)
			l := mustLock(t, c, "lookup-unlock")
			open, looked, _ := brokenWhileLookupHeld(t, c, in, l)
			l.Unlock(t.Context())
			if looked() {
				t.Fatal("Unlock returned only after the lease lookup did")
			}
			open()
			if err := l.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
				t.Fatalf("Unlock: got %v, want ErrKeyDeleted", err)
			}
		})
	}
	t.Run("Do", func(t *testing.T) {
		fcli, in := faulty(t, 62)
		c := newLocker(t, fcli)
		inDo := make(chan *etcdlock.Lock)
		doEnded := make(chan error, 1)
		go func() {
			doEnded <- c.Do(context.Background(), "lookup-do-return", func(ctx context.Context, dl *etcdlock.Lock) error {
				inDo <- dl
				<-ctx.Done()
				return nil
			})
		}()
		open, looked, _ := brokenWhileLookupHeld(t, c, in, <-inDo)
		err := <-doEnded
		if looked() {
			t.Fatal("Do returned only after the lease lookup did")
		}
		open()
		if !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("Do: got %v, want ErrKeyDeleted", err)
		}
	})
	t.Run("Close", func(t *testing.T) {
		fcli, in := faulty(t, 63)
		c := newLocker(t, fcli)
		l := mustLock(t, c, "lookup-close")
		_, looked, ended := brokenWhileLookupHeld(t, c, in, l)
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !looked() || !errors.Is(ended(), context.Canceled) {
			t.Fatalf("the lease lookup ended with %v, want context.Canceled: Close waited for it instead of ending it", ended())
		}
		err := l.Err()
		if !errors.Is(err, etcdlock.ErrKeyDeleted) || errors.Is(err, etcdlock.ErrClosed) {
			t.Fatalf("Err after a Break, then Close during the lookup: got %v, want ErrKeyDeleted, not ErrClosed", err)
		}
	})
}

// brokenWhileLookupHeld waits for l's key watch, holds the lease lookups
// of c's injector in (see gateLeaseLookupsWhy, whose functions it returns;
// the lookups are let go when the test ends), breaks l with another Client,
// and waits for l's Done.
func brokenWhileLookupHeld(t *testing.T, c *etcdlock.Client, in *reqfault.Injector, l *etcdlock.Lock) (open func(), looked func() bool, ended func() error) {
	t.Helper()
	poll.Until(t, "the key watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	open, looked, ended = gateLeaseLookupsWhy(in)
	t.Cleanup(open)
	if _, err := newLocker(t, etcdClient(t)).Break(t.Context(), l.Name(), l.Token()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Done(), 5*time.Second, "Done after the Break")
	return open, looked, ended
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
