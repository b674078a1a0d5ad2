package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// A LockAll that fails (its second name is held elsewhere) releases the
// names it took at once, minimum hold or not: the caller never got them,
// so no job ran, and the period must not be used up. The control, a
// LockAll that succeeded and was unlocked, keeps its first name for the
// hold, so the TryLock below does tell a held key.
func TestMinHoldFailedLockAllKeepsNothing(t *testing.T) {
	const hold = time.Hour
	for _, failed := range []bool{true, false} {
		name := map[bool]string{true: "failed LockAll", false: "control: LockAll unlocked"}[failed]
		t.Run(name, func(t *testing.T) {
			cli := etcdClient(t)
			a, b := newLocker(t, cli), newLocker(t, cli)
			if failed {
				other := mustLock(t, b, "job-b")
				defer other.Unlock(t.Context())
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			m, err := a.LockAll(ctx, []string{"job-a", "job-b"}, etcdlock.WithMinHold(hold))
			cancel()
			switch {
			case failed && err == nil:
				t.Fatal("LockAll with job-b held elsewhere: got the locks, want an error")
			case !failed && err != nil:
				t.Fatalf("LockAll: got %v, want the locks", err)
			case !failed:
				if err := m.Unlock(t.Context()); err != nil {
					t.Fatalf("Unlock: got %v, want nil", err)
				}
			}
			l, err := b.TryLock(t.Context(), "job-a")
			if got := err == nil; got != failed {
				t.Fatalf("TryLock(job-a) after the LockAll: got %v, want the lock %v", err, failed)
			}
			if failed {
				l.Unlock(t.Context())
			} else if !errors.Is(err, etcdlock.ErrLocked) {
				t.Fatalf("TryLock(job-a): got %v, want ErrLocked", err)
			}
		})
	}
}

// A minimum-hold lock whose key someone else deleted before Unlock: Unlock
// reports the loss, and the hold's lease, granted for the move that found
// no key, does not stay behind (empty, for as long as the hold, which may
// be a year): Unlock revokes it in the background.
func TestMinHoldLostLeavesNoLease(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli)
	l, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(t.Context(), l.Key()); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("Unlock of a deleted key: got %v, want ErrLost", err)
	}
	// The revoke runs in the background once Unlock has returned (a slow
	// one must not hold Unlock up): the lease goes soon after, not at once.
	poll.Until(t, "the hold's lease revoked after Unlock", func() bool {
		resp, err := cli.TimeToLive(t.Context(), etcdlock.HoldLeaseForTest(l))
		if err != nil {
			t.Fatal(err)
		}
		return resp.TTL == -1
	})
}

// Close while a minimum hold's move is on its way: Close returns, revoking
// the session's lease and the key with it (the move had not landed), Done
// is closed, and the move, delivered late, finds no key to move.
func TestMinHoldCloseDuringMove(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 1)
	a := newLocker(t, fcli, etcdlock.WithCleanupTimeout(300*time.Millisecond))
	l, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	held := in.Hold(moves)
	unlocked := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		unlocked <- l.Unlock(ctx)
	}()
	<-held.Caught()
	if err := a.Close(t.Context()); err != nil {
		t.Fatalf("Close during the move: got %v, want nil", err)
	}
	t.Logf("Unlock: %v", <-unlocked)
	if err := held.Release(t.Context()); err != nil {
		t.Logf("late move: %v", err)
	}
	waitClosed(t, l.Done(), time.Second, "Done after Close")
	resp, err := direct.Get(t.Context(), l.Key())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key after Close and the late move: got %d keys (%v), want none", len(resp.Kvs), err)
	}
	ttl, err := direct.TimeToLive(t.Context(), etcdlock.HoldLeaseForTest(l))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hold's lease after Close: TTL %d s (-1: none)", ttl.TTL)
}
