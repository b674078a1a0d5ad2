package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestResumePastDeadline makes the clock of validity deadlines jump as a
// resume after a 30 s suspend would: the lock's ValidUntil lies in the
// past at once, and Done closes with ErrValidityExpired within a second,
// though the session's timers (on Go's monotonic clock, which does not
// count a suspend) still wait. On a deadline measured with time.Now the
// jump would go unseen and Done stay open for the rest of the TTL.
func TestResumePastDeadline(t *testing.T) {
	c := newLocker(t, etcdClient(t), etcdlock.WithTTL(20*time.Second))
	l := mustLock(t, c, "suspended")
	defer l.Unlock(t.Context())
	if time.Until(l.ValidUntil()) < 10*time.Second {
		t.Fatalf("ValidUntil: %v from now, want about the 20 s TTL", time.Until(l.ValidUntil()))
	}
	const suspend = 30 * time.Second
	etcdlock.JumpClockForTest(int64(suspend))
	defer etcdlock.JumpClockForTest(-int64(suspend))
	if d := time.Until(l.ValidUntil()); d > 0 {
		t.Fatalf("ValidUntil after the resume: %v from now, want past", d)
	}
	start := time.Now()
	waitClosed(t, l.Done(), 2*time.Second, "Done after a resume past the deadline")
	if !errors.Is(l.Err(), etcdlock.ErrValidityExpired) {
		t.Fatalf("Err: got %v, want ErrValidityExpired", l.Err())
	}
	t.Logf("Done closed %v after the resume", time.Since(start).Round(time.Millisecond))
}

// TestValidUntilStable checks that ValidUntil is one instant between
// renewals, not one that wanders with each call (it is converted from the
// deadline's clock; code that waits for it to move, as a renewal moves it,
// must not see it move by itself).
func TestValidUntilStable(t *testing.T) {
	c := newLocker(t, etcdClient(t), etcdlock.WithTTL(30*time.Second)) // the first renewal is 10 s away
	l := mustLock(t, c, "stable")
	defer l.Unlock(t.Context())
	first := l.ValidUntil()
	for range 1000 {
		if u := l.ValidUntil(); !u.Equal(first) {
			t.Fatalf("ValidUntil moved by %v between two calls with no renewal", u.Sub(first))
		}
	}
}
