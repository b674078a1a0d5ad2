package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// Pitfall 1: a Lock whose context ends, while waiting or during the first
// acquire transaction, leaves no key behind.
func TestCancelledLockLeavesNoKey(t *testing.T) {
	cli := etcdClient(t)
	t.Run("during the first txn", func(t *testing.T) {
		c := newLocker(t, cli)
		mustLock(t, c, "warm").Unlock(t.Context()) // the session exists already
		q := keysOf(t).Lock("one")
		failed := 0
		for i := range 80 {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%20)*100*time.Microsecond)
			l, err := c.Lock(ctx, "one")
			cancel()
			if err == nil {
				l.Unlock(t.Context())
				continue
			}
			failed++
			if ks := keys(t, cli, q); len(ks) != 0 {
				t.Fatalf("attempt %d ended with %v and left keys %v", i, err, ks)
			}
		}
		settle(t, cli)
		if ks := keys(t, cli, q); len(ks) != 0 {
			t.Fatalf("after all attempts: keys %v left behind", ks)
		}
		t.Logf("%d of 80 attempts ended by their deadline", failed)
		if failed == 0 {
			t.Fatal("no attempt was cut short: the test proved nothing")
		}
	})
	t.Run("while waiting", func(t *testing.T) {
		holder, waiter := newLocker(t, cli), newLocker(t, cli)
		l := mustLock(t, holder, "two")
		for range 10 {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			_, err := waiter.Lock(ctx, "two")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock while held, with a deadline: got %v, want context.DeadlineExceeded", err)
			}
			if ks := keys(t, cli, keysOf(t).Locks()); len(ks) != 1 || ks[0] != l.Key() {
				t.Fatalf("queue keys after a cancelled wait: got %v, want only the holder's %q", ks, l.Key())
			}
			if ks := keys(t, cli, keysOf(t).Markers()); len(ks) > 1 {
				t.Fatalf("lane markers after cancelled waits: got %v, want at most one (one lane used)", ks)
			}
		}
	})
	t.Run("cleanup retried after a partition", func(t *testing.T) {
		pcli, proxy := proxied(t)
		holder := newLocker(t, cli)
		waiter := newLocker(t, pcli, etcdlock.WithTTL(10*time.Second), etcdlock.WithCleanupTimeout(100*time.Millisecond))
		l := mustLock(t, holder, "three")
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() { _, err := waiter.Lock(ctx, "three"); got <- err }()
		waitQueued(t, cli, l, 2)
		proxy.Cut()
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock: got %v, want context.Canceled", err)
		}
		proxy.Reset() // the cleanup request dies with the connections
		proxy.Heal()
		deadline := time.Now().Add(10 * time.Second)
		for ks := keys(t, cli, keysOf(t).Locks()); len(ks) != 1; ks = keys(t, cli, keysOf(t).Locks()) {
			if time.Now().After(deadline) {
				t.Fatalf("keys 10s after the partition healed: got %v, want only the holder's", ks)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// A failed TryLock leaves no queue key behind, and no more than the marker
// of the one session lane it used.
func TestFailedTryLockLeavesNothing(t *testing.T) {
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	l := mustLock(t, a, "busy")
	for range 5 {
		if _, err := b.TryLock(t.Context(), "busy"); !errors.Is(err, etcdlock.ErrLocked) {
			t.Fatalf("TryLock: got %v, want ErrLocked", err)
		}
	}
	if ks := keys(t, cli, keysOf(t).Locks()); len(ks) != 1 || ks[0] != l.Key() {
		t.Fatalf("queue keys after failed TryLocks: got %v, want only the holder's %q", ks, l.Key())
	}
	if ks := keys(t, cli, keysOf(t).Markers()); len(ks) > 1 {
		t.Fatalf("lane markers after failed TryLocks: got %v, want at most one", ks)
	}
}

// settle gives requests sent earlier on cli's connection time to be
// applied: three writes through the same connection, each a raft commit
// that etcd applies in order after whatever was proposed before it. (A
// request still held in the client, e.g. being retried, is not covered.)
func settle(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	for range 3 {
		if _, err := cli.Put(t.Context(), prefix(t)+"settle", "x"); err != nil {
			t.Fatal(err)
		}
	}
}

// Pitfall 2: two goroutines sharing one Client (one session) take the same
// lock in turn, never together. Stock concurrency.Mutex, the control, names
// its key by lease ID alone, so both "hold" it at once with one token.
func TestSharedSessionMutualExclusion(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	var inside atomic.Int32
	tokens := make(chan fence.Token, 100)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 25 {
				l, err := c.Lock(t.Context(), "shared")
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once, want 1", n)
				}
				tokens <- l.Token()
				if _, err := cli.Get(t.Context(), "x"); err != nil { // some work
					t.Error(err)
				}
				inside.Add(-1)
				if err := l.Unlock(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(tokens)
	seen := map[fence.Token]bool{}
	for tok := range tokens {
		if seen[tok] {
			t.Fatalf("token %d handed out twice", tok)
		}
		seen[tok] = true
	}

	t.Run("control: stock Mutex", func(t *testing.T) {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(1))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m1 := concurrency.NewMutex(s, prefix(t)+"stock")
		m2 := concurrency.NewMutex(s, prefix(t)+"stock")
		if err := m1.Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		if err := m2.Lock(ctx); err != nil {
			t.Fatalf("stock Mutex: second Lock got %v; expected it to (wrongly) succeed at once", err)
		}
		if m1.Header().Revision == 0 || m1.Key() != m2.Key() {
			t.Fatalf("stock Mutex: keys %q and %q; expected the same key for both", m1.Key(), m2.Key())
		}
	})
}

// Pitfall 3: Unlock after the lease expired and another client took the
// lock leaves the new holder's key alone; a retried Unlock never deletes a
// newer lock of the same session.
func TestUnlockNeverDeletesAnotherHoldersKey(t *testing.T) {
	t.Parallel()
	t.Run("after lease expiry", func(t *testing.T) {
		pcli, proxy := proxied(t)
		a := newLocker(t, pcli)
		b := newLocker(t, etcdClient(t))
		la := mustLock(t, a, "stolen")
		proxy.Cut()
		waitClosed(t, la.Done(), 5*time.Second, "A's Done after its keepalives were cut")
		lb := mustLock(t, b, "stolen") // returns once etcd expired A's lease
		proxy.Heal()
		err := la.Unlock(t.Context())
		if !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("A's late Unlock: got %v, want an error matching ErrLost", err)
		}
		resp, err := etcdClient(t).Get(t.Context(), lb.Key())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("B's key after A's Unlock: got %d kvs (%v), want it still there", len(resp.Kvs), err)
		}
		select {
		case <-lb.Done():
			t.Fatalf("B's Done closed: %v", lb.Err())
		default:
		}
	})
	t.Run("retried unlock, same session", func(t *testing.T) {
		cli := etcdClient(t)
		c := newLocker(t, cli)
		l1 := mustLock(t, c, "again")
		if err := l1.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		l2 := mustLock(t, c, "again")
		if l2.Lease() != l1.Lease() {
			t.Fatalf("leases %x and %x: want the same session", l2.Lease(), l1.Lease())
		}
		if err := l1.Unlock(t.Context()); err != nil {
			t.Fatalf("retried Unlock: got %v, want nil", err)
		}
		resp, err := cli.Get(t.Context(), l2.Key())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("newer lock's key: got %d kvs (%v), want it still there", len(resp.Kvs), err)
		}
		l2.Unlock(t.Context())
	})
}

// Pitfall 4: when the lease is lost while holding, Done closes no later than
// the validity deadline, and that deadline is no later than etcd's expiry.
func TestLeaseLostWhileHolding(t *testing.T) {
	t.Parallel()
	t.Run("revoked", func(t *testing.T) {
		cli := etcdClient(t)
		c := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
		l := mustLock(t, c, "revoked")
		if _, err := cli.Revoke(t.Context(), l.Lease()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 2*time.Second, "Done after revoke")
		if !errors.Is(l.Err(), etcdlock.ErrLost) || !errors.Is(l.Err(), etcdlock.ErrLeaseExpired) {
			t.Fatalf("Err: got %v, want ErrLost and ErrLeaseExpired", l.Err())
		}
	})
	t.Run("key deleted", func(t *testing.T) {
		cli := etcdClient(t)
		c := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
		l := mustLock(t, c, "deleted")
		if _, err := cli.Delete(t.Context(), l.Key()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 2*time.Second, "Done after key deletion")
		if !errors.Is(l.Err(), etcdlock.ErrKeyDeleted) {
			t.Fatalf("Err: got %v, want ErrKeyDeleted", l.Err())
		}
	})
	for _, tt := range []struct {
		name  string
		after int // keepalives acknowledged before the cut
	}{
		{"cut right after Lock", 0},
		{"cut after renewals", 2},
	} {
		t.Run(tt.name, func(t *testing.T) { testCut(t, tt.after) })
	}
}

func testCut(t *testing.T, renewals int) {
	pcli, proxy := proxied(t)
	direct := etcdClient(t)
	c := newLocker(t, pcli)
	l := mustLock(t, c, "cut")
	first := l.ValidUntil()
	for i := range renewals { // wait for acknowledged keepalives to move the deadline
		deadline := time.Now().Add(3 * time.Second)
		for !l.ValidUntil().After(first.Add(time.Duration(i) * time.Millisecond)) {
			if time.Now().After(deadline) {
				t.Fatal("validity deadline never advanced")
			}
			time.Sleep(10 * time.Millisecond)
		}
		first = l.ValidUntil()
	}
	wch := direct.Watch(t.Context(), l.Key(), clientv3.WithRev(int64(l.Token())+1), clientv3.WithFilterPut())
	proxy.Cut()
	until := l.ValidUntil()
	doneAt := waitClosed(t, l.Done(), 5*time.Second, "Done after the cut")
	if !errors.Is(l.Err(), etcdlock.ErrValidityExpired) {
		t.Fatalf("Err: got %v, want ErrValidityExpired", l.Err())
	}
	const slack = 250 * time.Millisecond // timer and scheduler latency
	if late := doneAt.Sub(until); late > slack {
		t.Fatalf("Done closed %v after the validity deadline, want at most %v", late, slack)
	}
	var expiredAt time.Time
	select {
	case wr := <-wch:
		expiredAt = time.Now()
		if len(wr.Events) == 0 {
			t.Fatalf("watch: %v", wr.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("etcd did not expire the lease")
	}
	if until.After(expiredAt) {
		t.Fatalf("validity deadline %v after etcd deleted the key, want before", until.Sub(expiredAt))
	}
	proxy.Heal()
}

// Pitfall 5: a waiter whose own session expires while it waits gets an
// error, never the lock — also when the holder leaves meanwhile.
func TestWaiterSessionExpires(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	pcli, proxy := proxied(t)
	holder, waiter := newLocker(t, cli), newLocker(t, pcli)
	l := mustLock(t, holder, "wait")
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Lock(t.Context(), "wait")
		if err == nil {
			w.Unlock(context.Background())
			err = errors.New("waiter got the lock")
		}
		got <- err
	}()
	waitQueued(t, cli, l, 2)
	proxy.Cut()
	l.Unlock(t.Context())
	var err error
	select {
	case err = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter still waiting 5s after its keepalives were cut")
	}
	proxy.Heal()
	if !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("waiter's Lock: got %v, want an error matching ErrLost", err)
	}
}

// Pitfall 6: tokens strictly increase across successive holders of a name
// and are unique across names.
func TestTokensIncreaseAndAreUnique(t *testing.T) {
	cli := etcdClient(t)
	cs := []*etcdlock.Client{newLocker(t, cli), newLocker(t, cli), newLocker(t, cli)}
	seen := map[fence.Token]string{}
	last := map[string]fence.Token{}
	for i := range 30 {
		name := []string{"a", "b", "c"}[i%3]
		l := mustLock(t, cs[i%len(cs)], name)
		if tok := l.Token(); tok <= last[name] {
			t.Fatalf("%s: token %d after %d, want increasing", name, tok, last[name])
		}
		if other, dup := seen[l.Token()]; dup {
			t.Fatalf("token %d given to %s and %s", l.Token(), other, name)
		}
		seen[l.Token()], last[name] = name, l.Token()
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
