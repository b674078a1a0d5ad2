package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A transaction that changes the queues of two names of the scope
// (LockAll's keys, a session's lease expiring) shows whole in every
// Status: never a Status with half of it, a state no revision had (a
// watch per name reported it in two responses, and a Status built between
// them showed a holder of a and none of b). The millisecond pauses only
// let the watch report the states one by one.
func TestWatchStatusWholeTransactions(t *testing.T) {
	cli := etcdClient(t)
	watcher := newLocker(t, cli)
	k := keysOf(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := watcher.WatchStatus(ctx, etcdlock.StatusScope{Names: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	torn := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for st := range ch {
			if st.Err != nil {
				continue
			}
			if na, nb := len(st.Locks[0].Holders), len(st.Locks[1].Holders); na != nb {
				select {
				case torn <- fmt.Sprintf("rev %d: a has %d holders, b has %d", st.Rev, na, nb):
				default:
				}
			}
		}
	}()
	for i := 0; i < 300; i++ {
		ka, kb := fmt.Sprintf("%s%016x", k.Lock("a"), i+1), fmt.Sprintf("%s%016x", k.Lock("b"), i+1)
		if _, err := cli.Txn(t.Context()).Then(clientv3.OpPut(ka, ""), clientv3.OpPut(kb, "")).Commit(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if _, err := cli.Txn(t.Context()).Then(clientv3.OpDelete(ka), clientv3.OpDelete(kb)).Commit(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	select {
	case s := <-torn:
		t.Fatalf("a Status that no revision had: %s", s)
	default:
	}
}

// A session that takes and releases the followed lock again and again
// costs one LeaseTimeToLive, not one per hold: its lease's granted TTL is
// remembered while the lease has no key.
func TestWatchStatusOneTTLReadPerLease(t *testing.T) {
	fcli, in := faulty(t, 1)
	watcher := newLocker(t, fcli)
	holder := newLocker(t, etcdClient(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := watcher.WatchStatus(ctx, etcdlock.StatusScope{Names: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	until := func(held bool) {
		for st := next(t, ch); (st.Locks[0].Holder != nil) != held; st = next(t, ch) {
		}
	}
	before := in.Calls("Lease/LeaseTimeToLive")
	const n = 20
	for range n {
		l := mustLock(t, holder, "x")
		until(true)
		l.Unlock(t.Context())
		until(false)
	}
	if got := in.Calls("Lease/LeaseTimeToLive") - before; got > 1 {
		t.Errorf("LeaseTimeToLive calls for %d holds by one session (one lease): %d, want 1", n, got)
	}
}

// A change outside the scope sends no Status, though the one watch of the
// scope sees it: the next Status after another name's lock is taken and
// released is the followed name's own change.
func TestWatchStatusIgnoresOtherNames(t *testing.T) {
	watcher, other := newLocker(t, etcdClient(t)), newLocker(t, etcdClient(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := watcher.WatchStatus(ctx, etcdlock.StatusScope{Names: []string{"followed"}})
	if err != nil {
		t.Fatal(err)
	}
	first := next(t, ch)
	for range 3 {
		mustLock(t, other, "followed-not").Unlock(t.Context())
	}
	l := mustLock(t, other, "followed")
	defer l.Unlock(context.Background())
	st := next(t, ch)
	if st.Locks[0].Holder == nil || st.Locks[0].Holder.Token != l.Token() {
		t.Fatalf("the Status after first (rev %d) is rev %d, holder %+v: want the followed lock's holder, token %d",
			first.Rev, st.Rev, st.Locks[0].Holder, l.Token())
	}
}

// A role that may read the four key spaces but not the whole prefix has
// its one watch refused: after the first Status (its read works), every
// Status says so, naming the prefix to grant (a PermissionError), and
// none shows the watch as working.
func TestWatchStatusNarrowReadGrant(t *testing.T) {
	testenv.Long(t, "an etcd server with auth on, and 3 s of refused watches")
	p := "/narrow/"
	s := secureEtcd(t, time.Minute, false, p+"lock/")
	root := s.client(t, clientv3.Config{Username: "root", Password: rootPassword}, true)
	for _, sp := range []string{"elect/", "sem/", "group/"} {
		if _, err := root.RoleGrantPermission(t.Context(), "locker", p+sp, clientv3.GetPrefixRangeEnd(p+sp), clientv3.PermissionType(clientv3.PermRead)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := etcdlock.New(s.locker(t, nil), etcdlock.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	ch, err := c.WatchStatus(ctx, etcdlock.StatusScope{Names: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for st := range ch {
		n++
		var perm *etcdlock.PermissionError
		switch {
		case n == 1 && st.Err != nil:
			t.Fatalf("first status: %v, want the read's, with no error", st.Err)
		case n > 1 && !errors.As(st.Err, &perm):
			t.Fatalf("status %d: error %v, want a PermissionError", n, st.Err)
		}
	}
	if n < 2 {
		t.Fatalf("%d statuses in 3 s, want the refusal reported", n)
	}
}
