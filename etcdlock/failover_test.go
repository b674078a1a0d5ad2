package etcdlock_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Failover of one client given all three members' endpoints. clientv3
// spreads requests and streams round-robin over the members, so "the member
// a client is connected to" is a property of each stream: these tests give
// a client one member's endpoint alone until its streams (keepalives,
// watches) are open there, then all three (see pin), and stop that member.

// failoverTTL leaves room for a failover: the keepalive due a third of the
// TTL after the last one must find another member before the rest runs out.
const failoverTTL = 5 * time.Second

// stops are the members a test can stop, picked by the leader's index.
var stops = []struct {
	name string
	stop func(leader int) int
}{
	{"follower", func(leader int) int { return (leader + 1) % 3 }},
	{"leader", func(leader int) int { return leader }},
}

// A held lock survives the crash of the member its keepalives and watch
// use, then the crash of the leader (after the first member is back, so
// that a majority runs): keepalives resume on another member and the
// validity deadline moves on.
func TestFailoverKeepsLock(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	srv := members(t)
	leader := leaderOf(t, srv)
	follower := (leader + 1) % 3
	onFollower, onLeader := pin(t, srv, follower), pin(t, srv, leader)
	a, b := mustLock(t, onFollower.locks, "a"), mustLock(t, onLeader.locks, "b")
	locked := time.Now()
	awaitRenewal(t, a, locked) // a keepalive stream is open
	awaitRenewal(t, b, locked)
	onFollower.widen()
	onLeader.widen()

	srv.StopMember(follower)
	stopped := time.Now()
	t.Logf("member %d (follower) stopped: keepalives acknowledged again after %v",
		follower, awaitRenewal(t, a, stopped))
	restart(t, srv, follower)

	leader = leaderOf(t, srv)
	srv.StopMember(leader)
	stopped = time.Now()
	t.Logf("member %d (leader, pinned one: %v) stopped: keepalives acknowledged again after %v and %v",
		leader, leader == onLeader.member, awaitRenewal(t, a, stopped), awaitRenewal(t, b, stopped))
	assertHeld(t, a)
	assertHeld(t, b)
}

// Without a majority no keepalive is acknowledged, and Done closes at the
// validity deadline, not later.
func TestFailoverNoQuorum(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	const slack = 250 * time.Millisecond // timer and scheduler latency
	srv := members(t)
	cli := etcdClient(t, srv.Endpoints()...)
	locks := newLocker(t, cli, etcdlock.WithTTL(2*time.Second), etcdlock.WithCleanupTimeout(500*time.Millisecond))
	l := mustLock(t, locks, "job")
	leader := leaderOf(t, srv)
	srv.StopMember(leader)
	srv.StopMember((leader + 1) % 3)
	stopped := time.Now()

	closed := waitClosed(t, l.Done(), l.TTL()+time.Second, "Done")
	late := closed.Sub(l.ValidUntil())
	if !errors.Is(l.Err(), etcdlock.ErrValidityExpired) {
		t.Errorf("Err: got %v, want ErrValidityExpired", l.Err())
	}
	if late < 0 || late > slack {
		t.Errorf("Done closed %v after the validity deadline, want within [0, %v]", late, slack)
	}
	t.Logf("no quorum: Done closed %v after the second member stopped, %v after the validity deadline",
		closed.Sub(stopped), late)
}

// A waiter whose member crashed is handed the lock as fast as any other
// once the holder unlocks: its watch moved to a live member and is synced,
// with no 100 ms catch-up. The holder's member stays up.
func TestFailoverWaiterGranted(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	for _, tt := range stops {
		t.Run(tt.name, func(t *testing.T) { testWaiterFailover(t, tt.stop) })
	}
}

func testWaiterFailover(t *testing.T, pick func(leader int) int) {
	const n = 5 // waiters, one per lock
	srv := members(t)
	stopped := pick(leaderOf(t, srv))
	holder := pin(t, srv, (stopped+1)%3) // never widened: unaffected
	waiter := pin(t, srv, stopped)
	held := make([]*etcdlock.Lock, n)
	for i := range held {
		held[i] = mustLock(t, holder.locks, fmt.Sprintf("job%d", i))
	}
	grants := make([]chan grant, n)
	for i := range grants {
		grants[i] = make(chan grant, 1)
		go func() {
			l, err := waiter.locks.Lock(t.Context(), fmt.Sprintf("job%d", i))
			grants[i] <- grant{l, err, time.Now()}
		}()
	}
	// The waiters' watches are on the member to be stopped; the holder's
	// monitors on its own.
	awaitWatchers(t, srv, stopped, n)
	awaitWatchers(t, srv, holder.member, n)
	waiter.widen()

	srv.StopMember(stopped)
	start := time.Now()
	awaitWatchers(t, srv, -1, 2*n)
	leaderOf(t, srv) // the holder's release needs one
	t.Logf("member %d stopped: watches moved and synced, and a leader followed, after %v", stopped, time.Since(start))

	latencies := make([]time.Duration, n)
	for i, l := range held {
		start := time.Now()
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock job%d: %v", i, err)
		}
		g := awaitGrant(t, grants[i])
		latencies[i] = g.at.Sub(start)
	}
	slices.Sort(latencies)
	t.Logf("grant latencies after Unlock: %v", latencies)
	if raceEnabled {
		return // the race detector makes every request 5-10 times slower
	}
	if p50 := latencies[n/2]; p50 >= 50*time.Millisecond {
		t.Errorf("median grant latency: got %v, want < 50ms (etcd catches up unsynced watchers every 100 ms)", p50)
	}
}

// grant is what a waiter's Lock returned, and when.
type grant struct {
	l   *etcdlock.Lock
	err error
	at  time.Time
}

// awaitGrant returns the waiter's grant, failing the test if Lock failed or
// did not return within a second.
func awaitGrant(t *testing.T, ch <-chan grant) grant {
	t.Helper()
	select {
	case g := <-ch:
		if g.err != nil {
			t.Fatalf("waiter's Lock: got %v, want nil", g.err)
		}
		return g
	case <-time.After(time.Second):
		t.Fatal("waiter's Lock: not returned a second after Unlock")
		return grant{}
	}
}

// The lock's monitor and Observe watch on the crashed member; their watches
// move: a deletion of the lock's key closes Done, and Observe reports the
// next leader, within a second.
func TestFailoverWatches(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	for _, tt := range stops {
		t.Run(tt.name, func(t *testing.T) { testWatchFailover(t, tt.stop) })
	}
}

func testWatchFailover(t *testing.T, pick func(leader int) int) {
	srv := members(t)
	stopped := pick(leaderOf(t, srv))
	watcher := pin(t, srv, stopped)
	candidates := pin(t, srv, (stopped+1)%3) // never widened: unaffected
	l := mustLock(t, watcher.locks, "job")
	first := mustCampaign(t, candidates.locks, "boss", "first")
	var second *etcdlock.Term
	campaigned := make(chan error, 1)
	go func() {
		var err error
		second, err = candidates.locks.Campaign(t.Context(), "boss", "second")
		campaigned <- err
	}()
	leaders, err := watcher.locks.Observe(t.Context(), "boss")
	if err != nil {
		t.Fatal(err)
	}
	if e := nextLeader(t, leaders); e.Data != "first" {
		t.Fatalf("Observe: got leader %q, want first", e.Data)
	}
	awaitWatchers(t, srv, stopped, 2) // the monitor's and Observe's
	watcher.widen()

	srv.StopMember(stopped)
	leaderOf(t, srv) // a write needs one
	assertHeld(t, l)
	start := time.Now()
	if err := srv.DeleteKey(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	took := waitClosed(t, l.Done(), time.Second, "Done after DeleteKey").Sub(start)
	if !errors.Is(l.Err(), etcdlock.ErrKeyDeleted) {
		t.Errorf("Err: got %v, want ErrKeyDeleted", l.Err())
	}

	start = time.Now()
	if err := first.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	e := nextLeader(t, leaders)
	observed := time.Since(start)
	select {
	case err := <-campaigned:
		if err != nil {
			t.Fatalf("Campaign second: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Campaign second: not returned a second after Observe reported it")
	}
	if e.Data != "second" || e.Token != second.Token() {
		t.Errorf("Observe after Resign: got %q (token %d), want second (token %d)", e.Data, e.Token, second.Token())
	}
	t.Logf("member %d stopped: Done closed %v after DeleteKey; Observe reported the next leader %v after Resign",
		stopped, took, observed)
}

// nextLeader returns the next Entry on leaders, failing the test after a
// second.
func nextLeader(t *testing.T, leaders <-chan etcdlock.Entry) etcdlock.Entry {
	t.Helper()
	select {
	case e, ok := <-leaders:
		if !ok {
			t.Fatal("Observe: channel closed")
		}
		return e
	case <-time.After(time.Second):
		t.Fatal("Observe: no leader reported within a second")
		return etcdlock.Entry{}
	}
}

// A waiter keeps its place through a short loss of quorum: the member it
// watches on cancels its watch (no leader for three election timeouts),
// and the read of the queue that follows waits for a leader; once a
// majority is back the waiter is handed the lock when the holder unlocks.
// The holder talks to another member, which is stopped and restarted, so
// that the waiter's read is the only one its member has pending when a
// leader is elected.
func TestFailoverWaiterOutlastsQuorumLoss(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	srv := members(t)
	stay := leaderOf(t, srv)
	a, b := (stay+1)%3, (stay+2)%3
	holder, waiter := pin(t, srv, a), pin(t, srv, stay)
	h := mustLock(t, holder.locks, "job")
	granted := make(chan grant, 1)
	go func() {
		l, err := waiter.locks.Lock(t.Context(), "job")
		granted <- grant{l, err, time.Now()}
	}()
	awaitWatchers(t, srv, stay, 1) // the waiter's

	srv.StopMember(a)
	srv.StopMember(b)
	start := time.Now()
	awaitWatchers(t, srv, stay, 0)
	t.Logf("no quorum: the waiter's watch cancelled after %v", time.Since(start))
	restart(t, srv, a)
	leaderOf(t, srv)
	t.Logf("quorum back after %v", time.Since(start))
	select {
	case g := <-granted:
		t.Fatalf("waiter's Lock: returned (%v) while the lock was held", g.err)
	default:
	}
	assertHeld(t, h)
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	awaitGrant(t, granted)
}
