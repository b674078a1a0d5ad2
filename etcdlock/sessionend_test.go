package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Tests of the session closing its locks' Done when it ends: every lock
// once, with the session's cause, also when a release, a Close or another
// acquisition races it.

// settled waits until the hold durations of n ended locks are recorded
// (telemetry follows the Done channels), then checks that no lock was
// counted twice and none is still counted as held.
func settled(t *testing.T, in *instrumented, n int64) {
	t.Helper()
	poll.Until(t, "the hold durations of the ended locks", func() bool { return in.Sum(t, "fencelock.lock.hold.duration") >= n })
	if got := in.Sum(t, "fencelock.lock.hold.duration"); got != n {
		t.Errorf("ends recorded: got %d, want %d", got, n)
	}
	if got := in.Sum(t, "fencelock.lock.holders"); got != 0 {
		t.Errorf("holders after every lock ended: got %d, want 0", got)
	}
}

// A revoked lease ends every lock and term held on it, watched or not,
// whether its monitor started or not, each with ErrLeaseExpired and each
// counted once.
func TestSessionLossEndsEveryLockOnce(t *testing.T) {
	in, opts := withTelemetry(t)
	direct := etcdClient(t)
	c := newLocker(t, direct, append(opts, etcdlock.WithTTL(5*time.Second))...)
	var held []interface {
		Done() <-chan struct{}
		Err() error
		Lease() clientv3.LeaseID
	}
	for i := range 20 {
		var o []etcdlock.LockOption
		if i%2 == 1 {
			o = append(o, etcdlock.WithoutKeyWatch())
		}
		l, err := c.Lock(t.Context(), fmt.Sprintf("l%d", i), o...)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		if i == 9 {
			time.Sleep(60 * time.Millisecond) // the first ten monitors start
		}
	}
	term, err := c.Campaign(t.Context(), "e", "v")
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, term)
	if _, err := direct.Revoke(t.Context(), term.Lease()); err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		waitClosed(t, h.Done(), 3*time.Second, fmt.Sprintf("Done of holder %d", i))
		if err := h.Err(); !errors.Is(err, etcdlock.ErrLost) || !errors.Is(err, etcdlock.ErrLeaseExpired) {
			t.Errorf("holder %d: Err got %v, want ErrLost and ErrLeaseExpired", i, err)
		}
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	settled(t, in, int64(len(held)))
	if got := in.Sum(t, "fencelock.lock.losses", cause("lease_expired")); got != int64(len(held)) {
		t.Errorf("losses by lease_expired: got %d, want %d", got, len(held))
	}
}

// Close racing Lock, TryLock and Unlock on other goroutines returns, and
// leaves every lock it returned with Done closed by the time it returns,
// with ErrUnlocked or ErrClosed; Lock calls that lose the race fail with
// ErrClosed.
func TestCloseRacesLockAndUnlock(t *testing.T) {
	in, opts := withTelemetry(t)
	c := newLocker(t, etcdClient(t), opts...)
	var (
		mu    sync.Mutex
		locks []*etcdlock.Lock
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	var once sync.Once
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				var o []etcdlock.LockOption
				if (w+i)%2 == 0 {
					o = append(o, etcdlock.WithoutKeyWatch())
				}
				lock := c.Lock
				if w%3 == 0 {
					lock = c.TryLock
				}
				l, err := lock(t.Context(), fmt.Sprintf("w%d-%d", w, i), o...)
				if err != nil {
					if !errors.Is(err, etcdlock.ErrClosed) {
						t.Errorf("Lock racing Close: got %v, want ErrClosed", err)
					}
					return
				}
				mu.Lock()
				locks = append(locks, l)
				if len(locks) >= 60 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
				switch i % 3 {
				case 0:
					l.Unlock(t.Context())
				case 1:
					wg.Add(1)
					go func() { defer wg.Done(); l.Unlock(t.Context()) }()
				}
			}
		}()
	}
	waitClosed(t, enough, 10*time.Second, "60 locks taken")
	closed := make(chan struct{})
	go func() { defer close(closed); c.Close(t.Context()) }()
	waitClosed(t, closed, 5*time.Second, "Close")
	mu.Lock()
	for i, l := range locks {
		select {
		case <-l.Done():
		default:
			t.Errorf("lock %d (%s): Done open after Close returned", i, l.Name())
		}
	}
	mu.Unlock()
	wg.Wait()
	for i, l := range locks {
		if err := l.Err(); !errors.Is(err, etcdlock.ErrUnlocked) && !errors.Is(err, etcdlock.ErrClosed) {
			t.Errorf("lock %d (%s): Err got %v, want ErrUnlocked or ErrClosed", i, l.Name(), err)
		}
	}
	settled(t, in, int64(len(locks)))
}

// Releases racing the loss of their session: each lock ends once, with
// ErrUnlocked or ErrLeaseExpired, and Unlock reports the loss or nothing.
func TestUnlockRacesSessionLoss(t *testing.T) {
	in, opts := withTelemetry(t)
	direct := etcdClient(t)
	c := newLocker(t, direct, append(opts, etcdlock.WithTTL(5*time.Second))...)
	var locks []*etcdlock.Lock
	for i := range 30 {
		var o []etcdlock.LockOption
		if i%2 == 1 {
			o = append(o, etcdlock.WithoutKeyWatch())
		}
		l, err := c.Lock(t.Context(), fmt.Sprintf("u%d", i), o...)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Unlock(t.Context()); err != nil && !errors.Is(err, etcdlock.ErrLeaseExpired) {
				t.Errorf("Unlock racing the lease's revocation: got %v, want nil or ErrLeaseExpired", err)
			}
		}()
	}
	if _, err := direct.Revoke(t.Context(), locks[0].Lease()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, l := range locks {
		waitClosed(t, l.Done(), 3*time.Second, fmt.Sprintf("Done of lock %d", i))
		if err := l.Err(); !errors.Is(err, etcdlock.ErrUnlocked) && !errors.Is(err, etcdlock.ErrLeaseExpired) {
			t.Errorf("lock %d: Err got %v, want ErrUnlocked or ErrLeaseExpired", i, err)
		}
	}
	settled(t, in, int64(len(locks)))
}

// An acquisition whose session ended after enqueue checked it (and before
// newLock registered the lock) fails with the session's cause: Lock never
// returns a lost lock. The monitor's timer it set neither leaks nor holds
// up Close.
func TestLockOnEndedSession(t *testing.T) {
	for _, noWatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("noWatch=%v", noWatch), func(t *testing.T) {
			c := newLocker(t, etcdClient(t))
			l, err := etcdlock.LockOnEndedSessionForTest(t.Context(), c, "ended", noWatch)
			if !errors.Is(err, etcdlock.ErrLost) || !errors.Is(err, etcdlock.ErrLeaseExpired) {
				t.Fatalf("lock made on an ended session: got %v, %v, want an error matching ErrLost and ErrLeaseExpired", l, err)
			}
			if l != nil {
				t.Fatalf("lock made on an ended session: got a lock, want none")
			}
			if _, err := c.Lock(t.Context(), "next"); err != nil {
				t.Fatalf("Lock on the next session: %v", err)
			}
			closed := make(chan struct{})
			go func() { defer close(closed); c.Close(t.Context()) }()
			waitClosed(t, closed, 2*time.Second, "Close")
		})
	}
}

// A release whose reply was lost is retried in the background; when the
// Client is closed before the retry, the lock ends with ErrClosed (or
// ErrUnlocked, had the retry landed), never with a loss of no cause.
func TestRetriedUnlockEndsWithClose(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, opts := withTelemetry(t)
			fcli, inj := faulty(t, uint64(i))
			c := newLocker(t, fcli, opts...)
			l := mustLock(t, c, "r")
			inj.Next(deletes(l.Key()), reqfault.LostReply)
			if err := l.Unlock(t.Context()); err == nil {
				t.Fatal("Unlock whose reply was lost: got nil, want an error")
			}
			if err := c.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, l.Done(), time.Second, "Done after Close")
			if err := l.Err(); !errors.Is(err, etcdlock.ErrClosed) && !errors.Is(err, etcdlock.ErrUnlocked) {
				t.Fatalf("Err: got %#v, want ErrClosed or ErrUnlocked", err)
			}
		})
	}
}

// An acquisition that finds the session's lease gone ends the session, and
// with it every lock held on it, and succeeds on a new one.
func TestAcquireOnLostLeaseEndsItsLocks(t *testing.T) {
	in, opts := withTelemetry(t)
	direct := etcdClient(t)
	fcli, inj := faulty(t, 7)
	c := newLocker(t, fcli, append(opts, etcdlock.WithTTL(9*time.Second))...)
	watched := mustLock(t, c, "watched")
	unwatched, err := c.Lock(t.Context(), "unwatched", etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	inj.Before(creates(keysOf(t).Lock("next")), func(req any) {
		once.Do(func() {
			put := req.(*pb.TxnRequest).Success[0].GetRequestPut()
			direct.Revoke(context.Background(), clientv3.LeaseID(put.Lease))
		})
	})
	next := mustLock(t, c, "next")
	if next.Lease() == watched.Lease() {
		t.Fatalf("lock after the lease was revoked: on lease %x, want a new one", next.Lease())
	}
	for _, l := range []*etcdlock.Lock{watched, unwatched} {
		waitClosed(t, l.Done(), 2*time.Second, "Done of "+l.Name())
		if err := l.Err(); !errors.Is(err, etcdlock.ErrLeaseExpired) {
			t.Errorf("%s: Err got %v, want ErrLeaseExpired", l.Name(), err)
		}
	}
	if err := next.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	settled(t, in, 3)
}

// Close racing the end of its session by another goroutine (an Unlock that
// finds the lease gone) returns only once the session closed every lock's
// Done, also of locks held WithoutKeyWatch, which have no monitor Close
// would wait for.
func TestCloseWaitsForSessionEnd(t *testing.T) {
	direct := etcdClient(t)
	for round := range 5 {
		c := newLocker(t, direct, etcdlock.WithTTL(9*time.Second))
		var (
			mu    sync.Mutex
			locks []*etcdlock.Lock
			wg    sync.WaitGroup
		)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					l, err := c.Lock(t.Context(), fmt.Sprintf("r%d-%d-%d", round, w, i), etcdlock.WithoutKeyWatch())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					locks = append(locks, l)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if _, err := direct.Revoke(t.Context(), locks[0].Lease()); err != nil {
			t.Fatal(err)
		}
		go locks[0].Unlock(t.Context()) // finds the lease gone: ends the session
		waitClosed(t, locks[len(locks)/2].Done(), 5*time.Second, "a lock's Done")
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, l := range locks {
			select {
			case <-l.Done():
			default:
				open++
			}
		}
		if open > 0 {
			t.Fatalf("round %d: %d of %d locks' Done open after Close returned", round, open, len(locks))
		}
	}
}

// Close ends the Lock calls waiting for their turn with ErrClosed, not with
// the cancellation of the session's requests it causes.
func TestCloseEndsWaitersWithErrClosed(t *testing.T) {
	cli := etcdClient(t)
	holder := newLocker(t, cli)
	mustLock(t, holder, "busy")
	c := newLocker(t, cli)
	errs := make(chan error)
	for range 10 {
		go func() {
			_, err := c.Lock(t.Context(), "busy")
			errs <- err
		}()
	}
	waitKeys(t, cli, keysOf(t).Lock("busy"), 11)
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := <-errs; !errors.Is(err, etcdlock.ErrClosed) {
			t.Errorf("Lock waiting when Close was called: got %v, want ErrClosed", err)
		}
	}
}

// Locks taken and released while their sessions' leases are revoked again
// and again: the session's end is reached by its renewal, monitors,
// releases and acquisitions at once. Nothing deadlocks, every lock ends
// once, and Close returns.
func TestSessionChurn(t *testing.T) {
	t.Parallel()
	in, opts := withTelemetry(t)
	direct := etcdClient(t)
	c := newLocker(t, direct, append(opts, etcdlock.WithTTL(3*time.Second))...)
	ctx, stop := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer stop()
	var (
		mu    sync.Mutex
		locks []*etcdlock.Lock
		wg    sync.WaitGroup
	)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				var o []etcdlock.LockOption
				if i%2 == 0 {
					o = append(o, etcdlock.WithoutKeyWatch())
				}
				l, err := c.Lock(ctx, fmt.Sprintf("w%d-%d", w, i%4), o...)
				if err != nil {
					continue // lost while acquiring, or ctx ended
				}
				mu.Lock()
				locks = append(locks, l)
				mu.Unlock()
				if i%3 != 0 {
					l.Unlock(t.Context())
				}
			}
		}()
	}
	for ctx.Err() == nil {
		mu.Lock()
		var lease clientv3.LeaseID
		if len(locks) > 0 {
			lease = locks[len(locks)-1].Lease()
		}
		mu.Unlock()
		if lease != 0 {
			direct.Revoke(t.Context(), lease)
		}
		time.Sleep(30 * time.Millisecond)
	}
	finished := make(chan struct{})
	go func() { defer close(finished); wg.Wait() }()
	waitClosed(t, finished, 5*time.Second, "workers")
	closed := make(chan struct{})
	go func() { defer close(closed); c.Close(t.Context()) }()
	waitClosed(t, closed, 5*time.Second, "Close")
	for i, l := range locks {
		select {
		case <-l.Done():
		default:
			t.Errorf("lock %d (%s): Done open after Close returned", i, l.Name())
		}
		switch err := l.Err(); {
		case errors.Is(err, etcdlock.ErrUnlocked), errors.Is(err, etcdlock.ErrClosed):
		case errors.Is(err, etcdlock.ErrLeaseExpired), errors.Is(err, etcdlock.ErrKeyDeleted):
		default:
			t.Errorf("lock %d (%s): Err got %v, want ErrUnlocked, ErrClosed, ErrLeaseExpired or ErrKeyDeleted", i, l.Name(), err)
		}
	}
	settled(t, in, int64(len(locks)))
	t.Logf("%d locks", len(locks))
}
