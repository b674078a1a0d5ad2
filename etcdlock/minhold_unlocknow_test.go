package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
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
