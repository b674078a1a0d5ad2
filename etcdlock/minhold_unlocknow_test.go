package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// A job whose program could not be started releases its minimum-hold lock
// with UnlockNow: another machine takes the lock at once, with a greater
// token, and the hold's lease is never granted. The control, Unlock,
// keeps the key for the hold, so the other machine's TryLock is refused.
func TestMinHoldUnlockNow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		unlock   func(*etcdlock.Lock, context.Context) error
		wantFree bool
	}{
		{"UnlockNow", (*etcdlock.Lock).UnlockNow, true},
		{"control: Unlock", (*etcdlock.Lock).Unlock, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := etcdClient(t)
			a, b := newLocker(t, cli), newLocker(t, cli)
			la, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(time.Hour))
			if err != nil {
				t.Fatalf("TryLock: got %v, want the lock", err)
			}
			holdLease := etcdlock.HoldLeaseForTest(la) // UnlockNow drops it
			if err := tt.unlock(la, t.Context()); err != nil {
				t.Fatalf("release: got %v, want nil", err)
			}
			select {
			case <-la.Done():
			default:
				t.Fatal("Done open after the release, want it closed")
			}
			lb, err := b.TryLock(t.Context(), "job")
			if got := err == nil; got != tt.wantFree {
				t.Fatalf("TryLock on another Client after the release: got %v, want the lock %v", err, tt.wantFree)
			}
			if !tt.wantFree {
				if !errors.Is(err, etcdlock.ErrLocked) {
					t.Fatalf("TryLock: got %v, want ErrLocked", err)
				}
				return
			}
			defer lb.Unlock(t.Context())
			if lb.Token() <= la.Token() {
				t.Fatalf("next holder's token: got %d, want above %d", lb.Token(), la.Token())
			}
			resp, err := cli.TimeToLive(t.Context(), holdLease)
			if err != nil || resp.TTL != -1 {
				t.Fatalf("the hold's lease: TTL %d (%v), want none granted (-1)", resp.TTL, err)
			}
			if err := la.Unlock(t.Context()); err != nil {
				t.Fatalf("Unlock after UnlockNow: got %v, want nil (idempotent)", err)
			}
		})
	}
}

// An Unlock whose move onto the hold's lease landed but lost its reply
// returns an error and retries in the background; an UnlockNow after it
// finds the key held already, and keeps the hold: another machine's
// TryLock is refused. Dropping the hold there, as UnlockNow did, deleted
// the moved key and handed the lock on within the period, though the
// caller's Unlock said the work began. The control, UnlockNow with no
// Unlock before it, frees the lock at once.
func TestMinHoldUnlockNowAfterUnlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		unlockFirst bool
		wantHeld    bool
	}{
		{"Unlock's move landed, its reply lost", true, true},
		{"control: UnlockNow alone", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct := etcdClient(t)
			fcli, in := faulty(t, 1)
			a := newLocker(t, fcli, etcdlock.WithCleanupTimeout(300*time.Millisecond))
			b := newLocker(t, direct)
			la, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(time.Hour))
			if err != nil {
				t.Fatalf("TryLock: got %v, want the lock", err)
			}
			if tt.unlockFirst {
				in.Next(moves, reqfault.LostReply)
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				err := la.Unlock(ctx)
				cancel()
				if err == nil {
					t.Fatal("Unlock with its move's reply lost: got nil, want an error")
				}
				if keyLease(t, direct, la.Key()) == la.Lease() {
					t.Fatal("after the lost move: key on the session's lease, want it on the hold's")
				}
			}
			if err := la.UnlockNow(t.Context()); err != nil {
				t.Fatalf("UnlockNow: got %v, want nil", err)
			}
			lb, err := b.TryLock(t.Context(), "job")
			if held := errors.Is(err, etcdlock.ErrLocked); held != tt.wantHeld {
				t.Fatalf("TryLock on another Client after UnlockNow: got %v, want held %v", err, tt.wantHeld)
			}
			if err == nil {
				lb.Unlock(t.Context())
			}
		})
	}
}

// UnlockNow's delete held back and delivered late, after its background
// retry deleted the key and the session reused the key's name for a newer
// acquisition: the late delete compares the key's create revision with
// the token, so the newer holder's key stays. The control, releasing
// unconditionally, deletes the newer holder's key.
func TestMinHoldUnlockNowLateDelete(t *testing.T) {
	t.Parallel()
	for _, unconditional := range []bool{false, true} {
		name := map[bool]string{false: "compare", true: "control: unconditional"}[unconditional]
		t.Run(name, func(t *testing.T) {
			opts := []etcdlock.Option{etcdlock.WithCleanupTimeout(300 * time.Millisecond)}
			if unconditional {
				opts = append(opts, etcdlock.UnconditionalReleaseForTest())
			}
			direct := etcdClient(t)
			fcli, in := faulty(t, 1)
			a := newLocker(t, fcli, opts...)
			l1, err := a.TryLock(t.Context(), "job", etcdlock.WithMinHold(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			held := in.Hold(deletes(l1.Key()))
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			err = l1.UnlockNow(ctx)
			cancel()
			if err == nil {
				t.Fatal("UnlockNow with its delete held: got nil, want an error")
			}
			<-held.Caught()
			waitClosed(t, l1.Done(), 5*time.Second, "Done after the background release")
			var l2 *etcdlock.Lock
			poll.Until(t, "the key's name reused for a new acquisition", func() bool {
				if l2 != nil {
					l2.Unlock(t.Context())
				}
				l2, err = a.TryLock(t.Context(), "job")
				return err == nil && l2.Key() == l1.Key()
			})
			if err := held.Release(t.Context()); err != nil {
				t.Logf("late delete: %v", err)
			}
			resp, err := direct.Get(t.Context(), l2.Key())
			if err != nil {
				t.Fatal(err)
			}
			kept := len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == int64(l2.Token())
			if kept == unconditional {
				t.Fatalf("newer acquisition's key (token %d) after the late delete: got kept %v, want %v", l2.Token(), kept, !unconditional)
			}
			l2.Unlock(t.Context())
		})
	}
}
