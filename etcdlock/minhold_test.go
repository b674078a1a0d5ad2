package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// minHold is the minimum hold of these tests: long enough that a run takes
// far less, short enough to wait for.
const minHold = 2 * time.Second

// runJob is one machine's run of a scheduled job: TryLock, a job that
// takes no time, Unlock. It reports whether the job ran, and the lock.
func runJob(t *testing.T, c *etcdlock.Client, opts ...etcdlock.LockOption) (bool, *etcdlock.Lock) {
	t.Helper()
	l, err := c.TryLock(t.Context(), "job", opts...)
	if errors.Is(err, etcdlock.ErrLocked) {
		return false, nil
	}
	if err != nil {
		t.Fatalf("TryLock: got %v, want nil or ErrLocked", err)
	}
	start := time.Now()
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: got %v, want nil", err)
	}
	if took := time.Since(start); took > minHold/2 {
		t.Fatalf("Unlock took %v, want it to return at once (well under the hold of %v)", took, minHold)
	}
	return true, l
}

// waitQueueEmpty waits until no key is queued for lock name of the test.
func waitQueueEmpty(t *testing.T, cli *clientv3.Client, name string) {
	t.Helper()
	poll.Until(t, "the queue of "+name+" empty", func() bool {
		resp, err := cli.Get(t.Context(), keysOf(t).Lock(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
}

// A job that takes a millisecond, run twice on one machine and then on a
// second in one period, runs once with a minimum hold, even though the
// first machine's Client is closed (its process gone) before the second
// tries; the next period's run gets a greater token. The control, without
// the option, runs every time.
func TestMinHoldRunsOncePerPeriod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     []etcdlock.LockOption
		wantRuns int
	}{
		{"min hold", []etcdlock.LockOption{etcdlock.WithMinHold(minHold)}, 1},
		{"control: none", nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := etcdClient(t)
			a, b := newLocker(t, cli), newLocker(t, cli)
			start := time.Now()
			ranA, la := runJob(t, a, tt.opts...)
			ranA2, _ := runJob(t, a, tt.opts...) // the same session: a reuse of the key's lane must wait too
			if err := a.Close(t.Context()); err != nil {
				t.Fatalf("Close: got %v, want nil", err)
			}
			ranB, _ := runJob(t, b, tt.opts...)
			if runs := btoi(ranA) + btoi(ranA2) + btoi(ranB); runs != tt.wantRuns {
				t.Fatalf("runs in one period: got %d, want %d", runs, tt.wantRuns)
			}
			if ranB {
				return
			}
			waitQueueEmpty(t, cli, "job")
			if held := time.Since(start); held < minHold {
				t.Fatalf("key gone %v after the acquisition, want at least %v", held, minHold)
			}
			ran, lb := runJob(t, b, tt.opts...)
			if !ran || lb.Token() <= la.Token() {
				t.Fatalf("next period: got ran %v, want true with a token greater than %d", ran, la.Token())
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// An Unlock after the minimum hold deletes the key at once.
func TestMinHoldPassed(t *testing.T) {
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	l, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // not synchronisation: the hold is to pass
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: got %v, want nil", err)
	}
	if ran, _ := runJob(t, b); !ran {
		t.Fatal("TryLock after a passed minimum hold: got ErrLocked, want the lock")
	}
}

func TestMinHoldInvalid(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	for _, d := range []time.Duration{-time.Nanosecond, etcdlock.MaxMinHold + 1} {
		_, err := c.TryLock(t.Context(), "job", etcdlock.WithMinHold(d))
		if !errors.Is(err, etcdlock.ErrInvalidOption) {
			t.Errorf("WithMinHold(%v): got %v, want ErrInvalidOption", d, err)
		}
	}
	sem, err := c.Semaphore("pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(t.Context(), etcdlock.WithMinHold(time.Second)); !errors.Is(err, etcdlock.ErrInvalidOption) {
		t.Errorf("Semaphore.TryAcquire WithMinHold: got %v, want ErrInvalidOption", err)
	}
}

// A reader's minimum hold keeps writers out until it has passed.
func TestMinHoldReader(t *testing.T) {
	testenv.Long(t, "a reader's minimum hold waited out (TestMinHoldRunsOncePerPeriod stays in the fast loop)")
	t.Parallel()
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	start := time.Now()
	r, err := a.TryRLock(t.Context(), "job", etcdlock.WithMinHold(minHold))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: got %v, want nil", err)
	}
	if ran, _ := runJob(t, b); ran {
		t.Fatal("writer's TryLock within the reader's minimum hold: got the lock, want ErrLocked")
	}
	waitQueueEmpty(t, cli, "job")
	if held := time.Since(start); held < minHold {
		t.Fatalf("reader's key gone %v after the acquisition, want at least %v", held, minHold)
	}
}

// moves matches the minimum hold's move: a transaction that puts a key
// keeping its value.
func moves(method string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if p := op.GetRequestPut(); p != nil && p.IgnoreValue {
			return true
		}
	}
	return false
}

// The move's requests arrive late, twice, or lose their reply: the key
// still stays for the minimum hold (once Done tells the Unlock settled),
// then goes, and the next holder's token is greater.
func TestMinHoldMoveFaults(t *testing.T) {
	testenv.Long(t, "a fault storm on minimum-hold moves")
	targets := []struct {
		name  string
		match reqfault.Match
	}{
		{"grant", reqfault.Method("Lease/LeaseGrant")},
		{"move", moves},
	}
	for _, target := range targets {
		for _, kind := range reqfault.Kinds {
			t.Run(target.name+"/"+kind.String(), func(t *testing.T) {
				direct := etcdClient(t)
				fcli, in := faulty(t, 1)
				a := newLocker(t, fcli, etcdlock.WithCleanupTimeout(300*time.Millisecond))
				b := newLocker(t, direct)
				start := time.Now()
				la, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(minHold))
				if err != nil {
					t.Fatal(err)
				}
				in.Next(target.match, kind)
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				err = la.Unlock(ctx)
				cancel()
				t.Logf("Unlock: %v", err)
				waitClosed(t, la.Done(), minHold, "Done after Unlock")
				if !errors.Is(la.Err(), etcdlock.ErrUnlocked) {
					t.Fatalf("Err: got %v, want ErrUnlocked", la.Err())
				}
				if err := a.Close(t.Context()); err != nil {
					t.Fatalf("Close: got %v, want nil", err)
				}
				if ran, _ := runJob(t, b); ran && time.Since(start) < minHold {
					t.Fatalf("TryLock %v after the acquisition: got the lock, want ErrLocked", time.Since(start))
				}
				waitQueueEmpty(t, direct, "job")
				if held := time.Since(start); held < minHold {
					t.Fatalf("key gone %v after the acquisition, want at least %v", held, minHold)
				}
				ran, lb := runJob(t, b)
				if !ran || lb.Token() <= la.Token() {
					t.Fatalf("after the hold: got ran %v, want true with a token greater than %d", ran, la.Token())
				}
			})
		}
	}
}

// A move delivered late, after the session reused the key for a newer
// acquisition of the same name, leaves that acquisition's key on the
// session's lease: the move compares the key's create revision. The
// control, moving unconditionally, puts the newer holder's key on the old
// hold's lease, which would delete it when it expires.
func TestMinHoldLateMoveSparesNewerAcquisition(t *testing.T) {
	testenv.Long(t, "it waits out a minimum hold")
	t.Parallel()
	for _, unconditional := range []bool{false, true} {
		name := map[bool]string{false: "compare", true: "control: unconditional"}[unconditional]
		t.Run(name, func(t *testing.T) {
			opts := []etcdlock.Option{etcdlock.WithCleanupTimeout(300 * time.Millisecond)}
			if unconditional {
				opts = append(opts, etcdlock.UnconditionalMoveForTest())
			}
			direct := etcdClient(t)
			fcli, in := faulty(t, 1)
			a := newLocker(t, fcli, opts...)
			l1, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(minHold))
			if err != nil {
				t.Fatal(err)
			}
			held := in.Hold(moves)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			l1.Unlock(ctx) // held: the background retry moves the key
			cancel()
			<-held.Caught()
			waitClosed(t, l1.Done(), minHold, "Done after the background move")
			hold := keyLease(t, direct, l1.Key())
			if hold == l1.Lease() {
				t.Fatal("after the move: key on the session's lease, want it on its own")
			}
			// Keep the hold's lease alive, so that the late move could
			// still put a key on it, and wait for the slot to be reused.
			keepAlive(t, direct, hold)
			var l2 *etcdlock.Lock
			poll.Until(t, "the slot reused for a new acquisition", func() bool {
				if l2 != nil {
					l2.Unlock(t.Context())
				}
				l2, err = a.TryLock(t.Context(), "job")
				return err == nil && l2.Key() == l1.Key()
			})
			if err := held.Release(t.Context()); err != nil {
				t.Logf("late move: %v", err)
			}
			got := keyLease(t, direct, l2.Key())
			if moved := got != l2.Lease(); moved != unconditional {
				t.Fatalf("newer acquisition's key after the late move: got lease %x (session %x, hold %x), want moved %v",
					int64(got), int64(l2.Lease()), int64(hold), unconditional)
			}
		})
	}
}

// keyLease returns the lease key is attached to.
func keyLease(t *testing.T, cli *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get %s: got %v (%d keys), want one key", key, err, len(resp.Kvs))
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// keepAlive renews lease id until the test ends.
func keepAlive(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := cli.KeepAlive(ctx, id)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// An Unlock whose key someone deleted during a minimum hold (its move onto
// the hold's lease refused) revokes that unused lease in the background:
// a revoke that hangs does not hold up the release, which tells the caller
// the lock was lost. Revoking on the caller's context first, as it did,
// spent that context on the revoke and left the release to the background
// ("retrying"), with Unlock's answer a context error.
func TestMinHoldUnlockNotHeldUpByRevoke(t *testing.T) {
	cli, in := faulty(t, 41)
	c := newLocker(t, cli, etcdlock.WithCleanupTimeout(300*time.Millisecond))
	l, err := c.Lock(t.Context(), "held", etcdlock.WithMinHold(time.Minute), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcdClient(t).Delete(t.Context(), l.Key()); err != nil {
		t.Fatal(err)
	}
	revoke := in.Hold(reqfault.Method("Lease/LeaseRevoke"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := l.Unlock(ctx); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Unlock with the hold's revoke hanging: got %v, want ErrKeyDeleted at once", err)
	}
	select {
	case <-revoke.Caught():
	case <-time.After(5 * time.Second):
		t.Fatal("the unused hold lease was not revoked")
	}
	revoke.Release(t.Context())
}
