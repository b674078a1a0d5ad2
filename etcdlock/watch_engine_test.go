package etcdlock_test

// Tests of the one watch engine as a whole: Observe's order within one
// revision, another etcd server, waiters that give up, a thousand waiters,
// an expired auth token with only waiters and observers.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Observe sends only leaders that led at some revision: when one revision
// deletes several candidates (a session's lease ends, deleting its leader
// and its candidate queued behind in one revision), Observe applies the
// revision whole and sends the candidate that leads after it, not a
// candidate that "led" between two events of one revision. A Client's
// session may queue several candidates in one election (a lane each).
func TestObserveSendsNoLeaderBetweenEventsOfOneRevision(t *testing.T) {
	cli := etcdClient(t)
	p := prefix(t)
	a := newLockerAt(t, cli, p, etcdlock.WithTTL(30*time.Second))
	b := newLockerAt(t, etcdClient(t), p)
	obs := newLockerAt(t, etcdClient(t), p)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	first, err := a.Campaign(ctx, "e", "a1")
	if err != nil {
		t.Fatal(err)
	}
	queued := func(n int) func() bool {
		return func() bool {
			q, err := obs.InspectElection(ctx, "e")
			return err == nil && len(q.Waiters) == n
		}
	}
	done := make(chan struct{}, 2)
	go func() { a.Campaign(ctx, "e", "a2"); done <- struct{}{} }() // A's second candidate, same lease
	poll.Until(t, "A's second candidate", queued(1))
	var third *etcdlock.Term
	go func() {
		var err error
		if third, err = b.Campaign(ctx, "e", "b"); err != nil {
			t.Errorf("B's Campaign: %v", err)
		}
		done <- struct{}{}
	}()
	poll.Until(t, "B's candidate", queued(2))
	q, err := obs.InspectElection(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	phantom := q.Waiters[0].Token // A's second: it never leads

	o := observe(t, ctx, obs, "e")
	o.waitSeen(t, []fence.Token{first.Token()}, "A's leader")
	if _, err := cli.Revoke(ctx, first.Lease()); err != nil { // both of A's keys go in one revision
		t.Fatal(err)
	}
	<-done
	<-done
	o.waitSeen(t, []fence.Token{third.Token()}, "B's leader")
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[phantom] {
		t.Errorf("Observe sent token %d, A's second candidate, deleted in the same revision as A's leader: it never led (Leader never returned it)", phantom)
	}
	cancel()
}

// The engine on the etcd servers besides the embedded one (see
// otherEtcds): a waiter takes the lock soon after its predecessor unlocks,
// a held lock learns its key was deleted, and Observe sends a new leader.
// The stream's client-chosen watch IDs need etcd 3.4 or later.
//
//	go test -run TestEngineOnOtherEtcd ./etcdlock  # needs etcd, etcd-3.5, etcd-3.6 (bash .ci/setup.sh), or FENCELOCK_OTHER_ETCD=URL
func TestEngineOnOtherEtcd(t *testing.T) {
	testenv.Long(t, "other etcd versions")
	t.Parallel()
	forEachEtcd(t, testEngineOn)
}

func testEngineOn(t *testing.T, cli *clientv3.Client) {
	p := prefix(t)
	c := newLockerAt(t, cli, p, etcdlock.WithTTL(3*time.Second))
	w := newLockerAt(t, etcdClient(t, cli.Endpoints()...), p, etcdlock.WithTTL(3*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	t.Run("waiter", func(t *testing.T) {
		h := mustLock(t, c, "a")
		got := make(chan time.Time, 1)
		go func() {
			l, err := w.Lock(ctx, "a")
			if err != nil {
				t.Errorf("waiter: %v", err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			l.Unlock(ctx)
		}()
		poll.Until(t, "the waiter queued", func() bool { return len(keys(t, cli, etcdlock.KeysUnder(p).Lock("a"))) == 2 })
		unlocked := time.Now()
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if d := (<-got).Sub(unlocked); d > 500*time.Millisecond {
			t.Errorf("waiter took the lock %v after its predecessor unlocked, want < 500ms", d)
		}
	})
	t.Run("held", func(t *testing.T) {
		l := mustLock(t, c, "b")
		poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
		if _, err := cli.Delete(ctx, l.Key()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 3*time.Second, "Done after its key was deleted")
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Errorf("Err: got %v, want ErrKeyDeleted", err)
		}
	})
	t.Run("observe", func(t *testing.T) {
		octx, ocancel := context.WithCancel(ctx)
		defer ocancel()
		o := observe(t, octx, w, "e")
		term, err := c.Campaign(ctx, "e", "v")
		if err != nil {
			t.Fatal(err)
		}
		o.waitSeen(t, []fence.Token{term.Token()}, "the leader")
		term.Resign(ctx)
		ocancel()
	})
}

// Waiters that give up leave no watcher on etcd's side: 300 waiters on one
// name (each watching its predecessor) whose contexts end at staggered
// times, some while the stream is being replaced.
func TestGivenUpWaitersLeaveNoServerWatchers(t *testing.T) {
	const n = 300
	srv := etcdlocktest.New(t)
	h := newLocker(t, etcdClient(t, srv.Endpoints()...), etcdlock.WithTTL(3*time.Second))
	c := newLocker(t, etcdClient(t, srv.Endpoints()...), etcdlock.WithTTL(3*time.Second))
	held := mustLock(t, h, "a")
	poll.Until(t, "the holder's watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(h); return k == 1 && ok })
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		ctx, cancel := context.WithCancel(t.Context())
		cancels[i] = cancel
		wg.Go(func() {
			if l, err := c.Lock(ctx, "a"); err == nil {
				t.Errorf("waiter %d took the lock", i)
				l.Unlock(t.Context())
			}
		})
	}
	poll.Until(t, "all queued", func() bool { q, err := h.Inspect(t.Context(), "a"); return err == nil && len(q.Waiters) == n })
	awaitWatchers(t, srv, 0, n+1) // each waiter's, and the holder's
	for i, cancel := range cancels {
		if i%50 == 25 {
			etcdlock.EndKeyWatchStreamForTest(c)
		}
		cancel()
		if i%7 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	awaitWatchers(t, srv, 0, 1)
	held.Unlock(t.Context())
}

// 1,000 waiters on one name take the lock one after the other, each within
// the run's bound, with the waiters' watch stream ended in the middle.
func TestThousandWaitersWithStreamEnd(t *testing.T) {
	testenv.Long(t, "a thousand waiters")
	n := 1000
	if raceEnabled {
		n = 200 // the race detector makes each handoff several times slower
	}
	c := newLocker(t, etcdClient(t), etcdlock.WithTTL(3*time.Second))
	h := newLocker(t, etcdClient(t), etcdlock.WithTTL(3*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	held := mustLock(t, h, "a")
	var inside, taken atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			l, err := c.Lock(ctx, "a")
			if err != nil {
				t.Errorf("Lock: %v", err)
				return
			}
			if inside.Add(1) != 1 {
				t.Error("two holders at once")
			}
			if taken.Add(1)%100 == 50 {
				etcdlock.EndKeyWatchStreamForTest(c)
			}
			inside.Add(-1)
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("Unlock: %v", err)
			}
		})
	}
	poll.Until(t, "all queued", func() bool { q, err := h.Inspect(ctx, "a"); return err == nil && len(q.Waiters) == n })
	etcdlock.EndKeyWatchStreamForTest(c)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := taken.Load(); got != int64(n) {
		t.Errorf("got %d acquisitions, want %d", got, n)
	}
}

// A Client with only a waiter and an observer on it (no held lock, so no
// refresh read), whose auth token expired while they waited: when its
// stream is replaced (opened with the expired token, so every creation on
// it is refused), both still get through: the waiter takes the lock after
// its holder unlocks, the observer sees the next leader.
func TestWaiterAndObserverAfterTokenExpiredAndStreamEnd(t *testing.T) {
	testenv.Long(t, "it waits for an auth token to expire")
	t.Parallel()
	p := prefix(t)
	sec := secureEtcd(t, time.Second, false, p)
	other := newLockerAt(t, sec.locker(t, nil), p, etcdlock.WithTTL(30*time.Second))
	c := newLockerAt(t, sec.locker(t, nil), p, etcdlock.WithTTL(3*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	held := mustLock(t, other, "a")
	first, err := other.Campaign(ctx, "e", "1")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "a")
		if err == nil {
			l.Unlock(ctx)
		}
		got <- err
	}()
	o := observe(t, ctx, c, "e")
	o.waitSeen(t, []fence.Token{first.Token()}, "the first leader")
	poll.Until(t, "the waiter queued", func() bool { q, err := other.Inspect(ctx, "a"); return err == nil && len(q.Waiters) == 1 })
	time.Sleep(2500 * time.Millisecond) // c's token expires: it sends no unary request meanwhile
	etcdlock.EndKeyWatchStreamForTest(c)
	time.Sleep(1500 * time.Millisecond)
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := other.Campaign(ctx, "e", "2")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: got %v, want the lock", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter: no lock 5s after the holder unlocked")
	}
	o.waitSeen(t, []fence.Token{second.Token()}, "the second leader")
	second.Resign(ctx)
	cancel()
}
