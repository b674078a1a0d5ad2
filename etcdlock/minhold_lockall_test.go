package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
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
