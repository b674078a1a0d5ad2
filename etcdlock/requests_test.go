package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Tests of requests that arrive late, twice, or lose their reply, each
// reproducing a bug found with a request-level fault injector.

// faulty returns an etcd client whose requests go through a fault injector.
func faulty(t testing.TB, seed uint64, eps ...string) (*clientv3.Client, *reqfault.Injector) {
	t.Helper()
	if len(eps) == 0 {
		eps = endpoints()
	}
	in := reqfault.New(seed)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: in.DialOptions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); in.Close() })
	return cli, in
}

// deletes matches transactions that delete key (any key when empty).
func deletes(key string) reqfault.Match {
	return func(method string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok {
			return false
		}
		for _, op := range append(txn.Success, txn.Failure...) {
			if d := op.GetRequestDeleteRange(); d != nil && (key == "" || string(d.Key) == key) {
				return true
			}
		}
		return false
	}
}

// creates matches transactions that put a key under q.
func creates(q string) reqfault.Match {
	return func(method string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok {
			return false
		}
		for _, op := range txn.Success {
			if p := op.GetRequestPut(); p != nil && strings.HasPrefix(string(p.Key), q) {
				return true
			}
		}
		return false
	}
}

// Bug 1: the cleanup of a cancelled Lock, delivered late, must not delete
// the key of a later acquisition that reuses the same key.
func TestLateCleanupSparesNewerAcquisition(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 1)
	holder := newLocker(t, direct)
	a := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second), etcdlock.WithCleanupTimeout(200*time.Millisecond))
	b := newLocker(t, direct, etcdlock.WithTTL(9*time.Second))
	h := mustLock(t, holder, "x")

	// A waits, gives up; its first cleanup request is held and delivered
	// later, its background retry frees the key.
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() { _, err := a.Lock(ctx, "x"); got <- err }()
	waitQueued(t, direct, h, 2)
	var waiterKey string // A's: the one that is not the holder's (lease IDs are random, so is their order)
	for _, k := range keys(t, direct, keysOf(t).Lock("x")) {
		if k != h.Key() {
			waiterKey = k
		}
	}
	held := in.Hold(deletes(waiterKey))
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: got %v, want context.Canceled", err)
	}
	<-held.Caught()
	waitKeys(t, direct, keysOf(t).Lock("x"), 1) // the background retry removed it

	// The holder leaves; A takes the lock again, on the same key.
	h.Unlock(t.Context())
	la := mustLock(t, a, "x")
	bctx, bcancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer bcancel()
	bgot := make(chan error, 1)
	go func() {
		lb, err := b.Lock(bctx, "x")
		if err == nil {
			err = errors.New("granted")
			if la.Err() == nil {
				err = errors.New("granted while A still holds (A's Err nil, lease alive)")
			}
			lb.Unlock(t.Context())
		}
		bgot <- err
	}()
	waitQueued(t, direct, la, 2)
	if err := held.Release(t.Context()); err != nil {
		t.Logf("late cleanup: %v", err)
	}
	if err := <-bgot; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's Lock while A holds: got %v, want context.DeadlineExceeded", err)
	}
	if la.Err() != nil {
		t.Fatalf("A's Err: got %v, want nil (A still holds)", la.Err())
	}
	la.Unlock(t.Context())
}

// Bug 2: a waiter whose lease is revoked after its predecessor left is not
// handed the lock, even when its view of the queue lags.
func TestWaiterNotGrantedAfterRevoke(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	pcli, proxy := proxied(t)
	holder := newLocker(t, direct)
	waiter := newLocker(t, pcli, etcdlock.WithTTL(9*time.Second))
	h := mustLock(t, holder, "r")
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(t.Context(), "r")
		if err == nil {
			err = errors.New("waiter got the lock")
			l.Unlock(t.Context())
		}
		got <- err
	}()
	waitQueued(t, direct, h, 2)
	resp, err := direct.Get(t.Context(), keysOf(t).Lock("r"), append(clientv3.WithLastCreate(), clientv3.WithPrefix())...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("waiter's key: %v %v", resp, err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	proxy.Delay(300 * time.Millisecond)
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Revoke(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter still waiting 10s after its lease was revoked")
	}
	proxy.Delay(0)
	if !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("waiter's Lock after its lease was revoked: got %v, want an error matching ErrLost", err)
	}
}

// Bug 3: deleting one lock's key does not end the session (and its other
// locks) because the lease has under a second left.
func TestKeyDeletedNearLeaseRenewal(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli, etcdlock.WithTTL(time.Second))
	for i := range 3 {
		a, b := mustLock(t, c, "a"), mustLock(t, c, "b")
		if _, err := cli.Delete(t.Context(), a.Key()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, a.Done(), 2*time.Second, "a's Done after its key was deleted")
		if !errors.Is(a.Err(), etcdlock.ErrKeyDeleted) || errors.Is(a.Err(), etcdlock.ErrLeaseExpired) {
			t.Fatalf("round %d: a's Err: got %v, want ErrKeyDeleted, not ErrLeaseExpired", i, a.Err())
		}
		if b.Err() != nil {
			t.Fatalf("round %d: b's Err after a's key was deleted: got %v, want nil", i, b.Err())
		}
		if err := b.Unlock(t.Context()); err != nil {
			t.Fatalf("round %d: b's Unlock: %v", i, err)
		}
	}
}

// Bug 4: attempts whose create request had an unknown outcome leave at most
// one marker key per lane behind, not one tombstone per attempt.
func TestUnknownCreatesDoNotPileUp(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 4)
	c := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second))
	mustLock(t, c, "warm").Unlock(t.Context())
	failed := 0
	for range 24 {
		in.Next(creates(keysOf(t).Locks()), reqfault.LostReply)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		l, err := c.Lock(ctx, "p")
		cancel()
		if err == nil {
			l.Unlock(t.Context())
			continue
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("no attempt failed: the test proved nothing")
	}
	if ks := keys(t, direct, keysOf(t).Locks()); len(ks) != 0 {
		t.Fatalf("queue keys left: %v", ks)
	}
	if ks := keys(t, direct, prefix(t)); len(ks) > 2 {
		t.Fatalf("%d attempts with unknown outcome left %d keys: %v; want at most one per slot used", failed, len(ks), ks)
	}
}

// Bug 5: a failed Unlock does not block the name for the life of the
// process, and a deletion by someone else afterwards is reported as a loss.
func TestFailedUnlockIsRetried(t *testing.T) {
	direct := etcdClient(t)
	pcli, proxy := proxied(t)
	a := newLocker(t, pcli, etcdlock.WithTTL(3*time.Second))
	b := newLocker(t, direct, etcdlock.WithTTL(3*time.Second))
	la := mustLock(t, a, "u")
	proxy.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	err := la.Unlock(ctx)
	cancel()
	if err == nil {
		t.Fatal("Unlock through a cut link: got nil, want an error")
	}
	proxy.Heal()
	ctx, cancel = context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	lb, err := b.Lock(ctx, "u")
	if err != nil {
		t.Fatalf("B's Lock after A's failed Unlock and a healed link: got %v, want the lock", err)
	}
	lb.Unlock(t.Context())
	if err := la.Unlock(t.Context()); err != nil {
		t.Fatalf("A's retried Unlock: got %v, want nil", err)
	}

	t.Run("key deleted by someone else first", func(t *testing.T) {
		la := mustLock(t, a, "v")
		proxy.Cut()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		la.Unlock(ctx)
		cancel()
		if _, err := direct.Delete(t.Context(), la.Key()); err != nil {
			t.Fatal(err)
		}
		proxy.Heal()
		waitClosed(t, la.Done(), 5*time.Second, "A's Done")
		if !errors.Is(la.Err(), etcdlock.ErrKeyDeleted) {
			t.Fatalf("A's Err after its key was deleted before its Unlock landed: got %v, want ErrKeyDeleted", la.Err())
		}
		if err := la.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("A's retried Unlock: got %v, want ErrKeyDeleted", err)
		}
	})
}

// Bug 6: a lease reported gone twice in a row gives an error matching
// ErrLost, not etcd's raw error.
func TestLeaseGoneTwiceIsLost(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 6)
	c := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second))
	mustLock(t, c, "warm").Unlock(t.Context())
	in.Before(creates(keysOf(t).Locks()), func(req any) { // revoke the lease the key is put on
		put := req.(*pb.TxnRequest).Success[0].GetRequestPut()
		direct.Revoke(context.Background(), clientv3.LeaseID(put.Lease))
	})
	_, err := c.Lock(t.Context(), "g")
	if !errors.Is(err, etcdlock.ErrLost) || !errors.Is(err, etcdlock.ErrLeaseExpired) {
		t.Fatalf("Lock with every session's lease revoked: got %v, want an error matching ErrLost and ErrLeaseExpired", err)
	}
}

// waitKeys waits until exactly n keys are under p.
func waitKeys(t *testing.T, cli *clientv3.Client, p string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ks := keys(t, cli, p); len(ks) != n; ks = keys(t, cli, p) {
		if time.Now().After(deadline) {
			t.Fatalf("keys under %q: got %v, want %d", p, ks, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A waiter whose watches etcd keeps refusing (as it does on a watch stream
// whose auth token expired) backs off instead of re-reading the queue in a
// busy loop.
func TestRefusedWatchesBackOff(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 7)
	holder := newLocker(t, direct)
	waiter := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second))
	h := mustLock(t, holder, "w")
	in.RefuseWatches(reqfault.Method("Watch/Watch"))
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(t.Context(), "w")
		if err == nil {
			l.Unlock(t.Context())
		}
		got <- err
	}()
	waitQueued(t, direct, h, 2)
	before, start := in.Calls("KV/Txn")+in.Calls("KV/Range"), time.Now()
	time.Sleep(time.Second) // a window to count requests in, not synchronisation
	n := in.Calls("KV/Txn") + in.Calls("KV/Range") - before
	rate := float64(n) / time.Since(start).Seconds()
	t.Logf("waiter with refused watches: %d reads in %v (%.0f/s)", n, time.Since(start).Round(time.Millisecond), rate)
	in.RefuseWatches(nil)
	h.Unlock(t.Context())
	if err := <-got; err != nil {
		t.Fatalf("waiter's Lock after watches work again: %v", err)
	}
	if rate > 30 {
		t.Fatalf("waiter sent %.0f reads/s while its watches were refused, want at most 30", rate)
	}
}

// A keepalive stuck on a hung stream is given up and retried on a new one
// while the lease can still be saved.
func TestHungKeepAliveIsRetried(t *testing.T) {
	t.Parallel()
	fcli, in := faulty(t, 8)
	c := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	l := mustLock(t, c, "k")
	first := l.ValidUntil()
	in.HangStreams(reqfault.Method("Lease/LeaseKeepAlive"))
	deadline := time.Now().Add(5 * time.Second)
	for in.Hung() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no keepalive was sent within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	in.HangStreams(nil)
	for !l.ValidUntil().After(first) {
		select {
		case <-l.Done():
			t.Fatalf("Done closed (%v) after one hung keepalive: the retry came too late", l.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if l.Err() != nil {
		t.Fatalf("Err after a renewal: %v", l.Err())
	}
	l.Unlock(t.Context())
}
