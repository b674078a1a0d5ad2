package etcdlock_test

// A group under request faults, operator deletes, other servers, auth,
// and works that misbehave (most first written by a review that tried to
// break it).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// rangeUnder matches a Range under q.
func rangeUnder(q string) reqfault.Match {
	return func(method string, req any) bool {
		r, ok := req.(*pb.RangeRequest)
		return ok && strings.HasPrefix(string(r.Key), q)
	}
}

// groupFaultCase joins a worker through a faulty client with one forced
// fault, and checks the group settles with every partition owned within
// 10 s (a request held until its caller gives up is given up on after
// half the TTL, 1 s here: TestGroupOwnedAgainAfterHungRequest holds the
// group to TTL + 1 s), and no two works run under live leases.
func groupFaultCase(t *testing.T, n int, match func(t *testing.T) reqfault.Match, kind reqfault.Kind, second bool) {
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 11)
	runs := newGroupRuns()
	if second { // a worker already there, so that a join moves partitions
		joinGroup(t, group(t, newLocker(t, direct), "g", n), runs.work(0))
		groupSettled(t, group(t, newLocker(t, direct), "g", n), 1, 10*time.Second)
	}
	in.Next(match(t), kind)
	c := newLocker(t, fcli, etcdlock.WithTTL(2*time.Second), etcdlock.WithCleanupTimeout(300*time.Millisecond))
	stop := joinGroup(t, group(t, c, "g", n), runs.work(0))
	workers := 1
	if second {
		workers = 2
	}
	g := group(t, newLocker(t, direct), "g", n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := g.Inspect(t.Context())
		if err == nil && balanced(st, workers) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%v fault: not settled after 10s: %d members, %d moves, owned %v (faults %v)", kind, len(st.Members), st.Moves, st.Owned(), in.Counts())
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if bad := runs.check(); len(bad) > 0 {
		t.Errorf("violations: %v", bad)
	}
}

// TestGroupRequestFaults gives one request of a joining worker a fault:
// late (held until its caller gives up), its reply lost, or sent twice;
// the member's create, a partition's create, or the read of the members.
func TestGroupRequestFaults(t *testing.T) {
	testenv.Long(t, "18 cases of request faults")
	memberCreate := func(t *testing.T) reqfault.Match { return creates(prefix(t) + "group/g/m/") }
	partCreate := func(t *testing.T) reqfault.Match { return creates(prefix(t) + "group/g/p/1/") }
	memberRead := func(t *testing.T) reqfault.Match { return rangeUnder(prefix(t) + "group/g/m/") }
	for _, kind := range []reqfault.Kind{reqfault.Late, reqfault.LostReply, reqfault.Twice} {
		for _, tc := range []struct {
			name  string
			match func(t *testing.T) reqfault.Match
		}{{"member_create", memberCreate}, {"partition_create", partCreate}, {"member_read", memberRead}} {
			t.Run(fmt.Sprintf("%v_%s", kind, tc.name), func(t *testing.T) { groupFaultCase(t, 2, tc.match, kind, false) })
		}
	}
}

// A partition release (a handoff) delivered late, twice or without its
// reply: the partition must still reach its new owner, and no key may be
// left behind.
func TestGroupReleaseFaults(t *testing.T) {
	testenv.Long(t, "request faults on every release")
	for _, kind := range []reqfault.Kind{reqfault.Late, reqfault.LostReply, reqfault.Twice} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			direct := etcdClient(t)
			fcli, in := faulty(t, 12)
			runs := newGroupRuns()
			c := newLocker(t, fcli, etcdlock.WithTTL(2*time.Second), etcdlock.WithCleanupTimeout(300*time.Millisecond))
			stop1 := joinGroup(t, group(t, c, "g", 4), runs.work(0))
			g := group(t, newLocker(t, direct), "g", 4)
			groupSettled(t, g, 1, 10*time.Second)
			in.Random(1, 200*time.Millisecond, deletes(""), kind) // every release faulted
			joinGroup(t, group(t, newLocker(t, direct), "g", 4), runs.work(0))
			groupSettled(t, g, 2, 10*time.Second)
			stop1()
			groupSettled(t, g, 1, 10*time.Second)
			t.Logf("faults: %v", in.Counts())
			if bad := runs.check(); len(bad) > 0 {
				t.Errorf("violations: %v", bad)
			}
		})
	}
}

// An operator deletes a member's key, then a partition's key, while the
// worker holds partitions: the group must settle again, with greater
// tokens, and no two works run under live leases.
func TestGroupOperatorDeletes(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	runs := newGroupRuns()
	joinGroup(t, group(t, newLocker(t, direct), "g", 6), runs.work(50*time.Millisecond))
	joinGroup(t, group(t, newLocker(t, direct), "g", 6), runs.work(50*time.Millisecond))
	g := group(t, newLocker(t, direct), "g", 6)
	st := groupSettled(t, g, 2, 10*time.Second)
	gone := st.Members[0]
	if _, err := direct.Delete(t.Context(), gone.Key); err != nil {
		t.Fatal(err)
	}
	st2 := settledWithout(t, g, 2, func(st etcdlock.GroupStatus) bool { // joined again: a key of its own (its name may be the same)
		return !slices.ContainsFunc(st.Members, func(m etcdlock.Entry) bool { return m.Token == gone.Token })
	})
	p := st2.Owners[0]
	if _, err := direct.Delete(t.Context(), p.Owner.Key); err != nil {
		t.Fatal(err)
	}
	st3 := settledWithout(t, g, 2, func(st etcdlock.GroupStatus) bool {
		return st.Owners[0].Owner != nil && st.Owners[0].Owner.Token != p.Owner.Token
	})
	if st3.Owners[0].Owner.Token <= p.Owner.Token {
		t.Errorf("partition 0 token %d after %d", st3.Owners[0].Owner.Token, p.Owner.Token)
	}
	if bad := runs.check(); len(bad) > 0 {
		t.Errorf("violations: %v", bad)
	}
}

// A work that returns nil at once ("nothing to do") is taken again after
// a pause, not in a tight loop of writes to etcd.
func TestGroupWorkReturnsAtOnce(t *testing.T) {
	t.Parallel()
	cli, in := faulty(t, 1) // counts this worker's requests; injects nothing
	var calls atomic.Int64
	stop := joinGroup(t, group(t, newLocker(t, cli), "g", 4), func(ctx context.Context, p *etcdlock.Partition) error {
		calls.Add(1)
		return nil
	})
	poll.Until(t, "a work called", func() bool { return calls.Load() > 0 })
	c0, txns0 := calls.Load(), in.Calls("KV/Txn")
	time.Sleep(2 * time.Second) // the span measured, not a wait for an event
	c1, txns1 := calls.Load(), in.Calls("KV/Txn")
	stop()
	t.Logf("a work returning nil at once: %d calls, %d transactions in 2s", c1-c0, txns1-txns0)
	// With the pause, each partition is taken about 5 times in 2 s (100,
	// 200, 400, 800 ms); without it, thousands.
	if n := c1 - c0; n > 40 {
		t.Errorf("tight loop: %d work calls (%d transactions) in 2 s from one idle worker of 4 partitions", n, txns1-txns0)
	}
}

// A work that calls runtime.Goexit (t.FailNow in a test's work does)
// fails as a work that returned an error: Join returns, it does not
// panic.
func TestGroupWorkGoexit(t *testing.T) {
	direct := etcdClient(t)
	c := newLocker(t, direct)
	got := make(chan any, 2)
	go func() {
		defer func() { got <- recover() }()
		err := group(t, c, "g", 1).Join(t.Context(), func(ctx context.Context, p *etcdlock.Partition) error {
			runtime.Goexit()
			return nil
		})
		got <- fmt.Sprintf("returned %v", err)
	}()
	select {
	case v := <-got:
		if s, ok := v.(string); !ok || !strings.Contains(s, "Goexit") {
			t.Errorf("Join after a Goexit in work: got %T %v, want it to return the Goexit as an error", v, v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Join did not end")
	}
}

// A panic in one work ends the membership: the keeper does not take the
// partition again and call work again before Join panics.
func TestGroupNoWorkAfterPanic(t *testing.T) {
	direct := etcdClient(t)
	c := newLocker(t, direct)
	var calls atomic.Int64
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		group(t, c, "g", 1).Join(t.Context(), func(ctx context.Context, p *etcdlock.Partition) error {
			if calls.Add(1) == 1 {
				panic("first")
			}
			time.Sleep(50 * time.Millisecond)
			return nil
		})
	}()
	v := <-done
	t.Logf("recovered %v after %d work calls", v, calls.Load())
	if calls.Load() > 1 {
		t.Errorf("work called %d times: called again after it panicked, before Join re-panicked", calls.Load())
	}
}

// A worker of the right number whose session is lost while a worker of
// another number keeps trying to join (a crash-looping bad deploy): the
// good worker's rejoin may find the bad one older, and must not end its
// Join for good.
func TestGroupDisagreeOnRejoin(t *testing.T) {
	testenv.Long(t, "20 s of revoked leases")
	t.Parallel() // it waits: 0.6 s of CPU in its 20 s
	direct := etcdClient(t)
	runs := newGroupRuns()
	good := newLocker(t, direct)
	ctx, cancel := context.WithCancel(t.Context())
	goodDone := make(chan error, 1)
	badDone := make(chan struct{})
	goodEnded, badStarted := false, false
	// Both Joins return before the test does, however it ends, so that
	// none of their goroutines outlives it (goleak, when it runs alone).
	defer func() {
		cancel()
		giveUp := time.Now().Add(10 * time.Second)
		if badStarted {
			select {
			case <-badDone:
			case <-time.After(time.Until(giveUp)):
				t.Error("the bad worker's Join did not return 10 s after its ctx ended")
			}
		}
		if !goodEnded {
			select {
			case <-goodDone:
			case <-time.After(time.Until(giveUp)):
				t.Error("the good worker's Join did not return 10 s after its ctx ended")
			}
		}
	}()
	go func() { goodDone <- group(t, good, "g", 4).Join(ctx, runs.work(0)) }()
	groupSettled(t, group(t, newLocker(t, direct), "g", 4), 1, 10*time.Second)
	bad := newLocker(t, direct)
	badStarted = true
	go func() { // crash-looping worker with 5 partitions
		defer close(badDone)
		for ctx.Err() == nil {
			group(t, bad, "g", 5).Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error { <-ctx.Done(); return nil })
			time.Sleep(10 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case err := <-goodDone:
			goodEnded = true
			t.Errorf("after %d revokes of the good worker's lease, its Join ended: %v", i, err)
			return
		default:
		}
		if lease := sessionLease(good); lease != 0 {
			runs.revoke(lease)
			direct.Revoke(t.Context(), lease)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("the good worker survived")
}

// A partition create (and a member create) held until its Join gave up,
// then delivered on the live session: it must not land.
func TestGroupHeldCreateLandsLate(t *testing.T) {
	for _, q := range []string{"group/g/p/0/", "group/g/m/"} {
		t.Run(strings.ReplaceAll(q, "/", "_"), func(t *testing.T) {
			direct := etcdClient(t)
			fcli, in := faulty(t, 13)
			c := newLocker(t, fcli, etcdlock.WithTTL(5*time.Second), etcdlock.WithCleanupTimeout(300*time.Millisecond))
			held := in.Hold(creates(prefix(t) + q))
			stop := joinGroup(t, group(t, c, "g", 1), func(ctx context.Context, p *etcdlock.Partition) error { <-ctx.Done(); return nil })
			<-held.Caught()
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Errorf("Join: %v", err)
			}
			err := held.Release(t.Context())
			t.Logf("held create delivered: %v", err)
			if ks := keys(t, direct, prefix(t)+"group/"); len(ks) != 0 {
				t.Errorf("keys left by a create delivered after Join ended, on a live session: %v", ks)
			}
			// The session lives on: a later Join must still work.
			stop2 := joinGroup(t, group(t, c, "g", 1), func(ctx context.Context, p *etcdlock.Partition) error { <-ctx.Done(); return nil })
			groupSettled(t, group(t, newLocker(t, direct), "g", 1), 1, 5*time.Second)
			stop2()
		})
	}
}

// groupOn runs two workers of a group of 6 on cli (prefix p), checks the
// share settles, that a leave hands its partitions over with greater
// tokens, and that Join without permission fails at once.
func groupOn(t *testing.T, mk func() *etcdlock.Client, inspect *etcdlock.Client) {
	runs := newGroupRuns()
	stop1 := joinGroup(t, group(t, mk(), "g", 6), runs.work(0))
	joinGroup(t, group(t, mk(), "g", 6), runs.work(0))
	g := group(t, inspect, "g", 6)
	before := groupSettled(t, g, 2, 15*time.Second)
	if err := stop1(); !errors.Is(err, context.Canceled) {
		t.Errorf("Join: %v", err)
	}
	after := groupSettled(t, g, 1, 15*time.Second)
	for k := range after.Owners {
		if after.Owners[k].Owner.Lease != before.Owners[k].Owner.Lease && after.Owners[k].Owner.Token <= before.Owners[k].Owner.Token {
			t.Errorf("partition %d: token %d after %d", k, after.Owners[k].Owner.Token, before.Owners[k].Owner.Token)
		}
	}
	if bad := runs.check(); len(bad) > 0 {
		t.Errorf("violations: %v", bad)
	}
}

// TestGroupOnEveryEtcd runs a group on every server version.
func TestGroupOnEveryEtcd(t *testing.T) {
	testenv.Long(t, "other etcd versions")
	forEachEtcd(t, func(t *testing.T, cli *clientv3.Client) {
		p := prefix(t)
		mk := func() *etcdlock.Client {
			return newLockerAt(t, etcdClient(t, cli.Endpoints()...), p, etcdlock.WithTTL(2*time.Second))
		}
		groupOn(t, mk, mk())
	})
}

// TestGroupPrefixGrant runs a group with etcd authentication on and the
// one grant on the prefix, and checks a Join without it fails at once.
func TestGroupPrefixGrant(t *testing.T) {
	p := prefix(t)
	e := secureEtcd(t, 2*time.Second, false, p)
	mk := func() *etcdlock.Client {
		return newLockerAt(t, e.locker(t, nil), p, etcdlock.WithTTL(2*time.Second))
	}
	groupOn(t, mk, mk())
	// Without the grant for the prefix: Join fails at once with a *PermissionError.
	other := "/elsewhere-review/"
	c := newLockerAt(t, e.locker(t, nil), other, etcdlock.WithTTL(2*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := group(t, c, "g", 2).Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error { <-ctx.Done(); return nil })
	var pe *etcdlock.PermissionError
	if !errors.As(err, &pe) {
		t.Errorf("Join without permission: got %v, want a *PermissionError at once", err)
	}
}

// Two Joins of one group on one Client (two worker goroutines in one
// process) share the session's lease: Inspect tells them apart by the
// member each partition's record names.
func TestGroupTwoJoinsOneClient(t *testing.T) {
	direct := etcdClient(t)
	c := newLocker(t, direct)
	var mu [2]atomic.Int64
	for i := range 2 {
		joinGroup(t, group(t, c, "g", 4), func(ctx context.Context, p *etcdlock.Partition) error {
			mu[i].Add(1)
			defer mu[i].Add(-1)
			<-ctx.Done()
			return nil
		})
	}
	st := groupSettled(t, group(t, newLocker(t, direct), "g", 4), 2, 10*time.Second)
	poll.Until(t, "two works each", func() bool { return mu[0].Load() == 2 && mu[1].Load() == 2 })
	for k, n := range st.Owned() {
		if n != 2 {
			t.Errorf("member %s owns %d by Inspect, want 2 (owned: %v)", k, n, st.Owned())
		}
	}
}

// Steady state: no unary request, with 3 workers of 16 partitions.
func TestGroupQuiet(t *testing.T) {
	testenv.Long(t, "4 s of steady state counted")
	t.Parallel()
	direct := etcdClient(t)
	runs := newGroupRuns()
	var ins []*reqfault.Injector
	for i := range 3 {
		fcli, in := faulty(t, uint64(20+i))
		ins = append(ins, in)
		joinGroup(t, group(t, newLocker(t, fcli, etcdlock.WithTTL(3*time.Second)), "g", 16), runs.work(0))
	}
	groupSettled(t, group(t, newLocker(t, direct), "g", 16), 3, 10*time.Second)
	count := func() (n int) {
		for _, in := range ins {
			n += in.Calls("KV/Txn") + in.Calls("KV/Range") + in.Calls("Lease/LeaseTimeToLive") + in.Calls("Lease/LeaseGrant")
		}
		return n
	}
	before := count()
	time.Sleep(4 * time.Second) // the span measured
	if n := count() - before; n != 0 {
		t.Errorf("%d unary requests in 4s of steady state", n)
	}
}

// settledWithout polls until cond holds of the group and it has settled
// with workers members.
func settledWithout(t *testing.T, g *etcdlock.Group, workers int, cond func(etcdlock.GroupStatus) bool) etcdlock.GroupStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := g.Inspect(t.Context())
		if err == nil && cond(st) && balanced(st, workers) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled as asked after 10s: %v; %d members, %d moves", err, len(st.Members), st.Moves)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
