package etcdlock_test

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestResumeWithTimeLeftRenews makes the clock of validity deadlines jump
// as a resume after a suspend of three quarters of the TTL would: the
// deadline is still ahead, and etcd (which did not sleep) still has the
// lease, so the holder renews at once and keeps the lock. Were the renewal
// scheduled on Go's monotonic clock, which did not see the suspend, it
// would come after the deadline, and Done would close with
// ErrValidityExpired a quarter of the TTL after the resume. The control,
// TestResumePastDeadline, jumps past the deadline: the lock is lost.
func TestResumeWithTimeLeftRenews(t *testing.T) {
	// A TTL long enough that the 5 s left after the jump is plenty for a
	// keepalive's round trip on a loaded machine (with 2 s left, as with an
	// 8 s TTL, one under -race took longer), and short enough that the
	// renewal a monotonic clock would schedule, a third of the TTL after
	// the lock (6.7 s), still comes after the deadline.
	const ttl = 20 * time.Second
	c := newLocker(t, etcdClient(t), etcdlock.WithTTL(ttl))
	l := mustLock(t, c, "suspended")
	jump := ttl * 3 / 4
	etcdlock.JumpClockForTest(int64(jump))
	// Jump back only once no session measured with the jump is left.
	defer etcdlock.JumpClockForTest(-int64(jump))
	defer c.Close(t.Context())
	left := time.Until(l.ValidUntil())
	if left <= 0 || left > ttl-jump {
		t.Fatalf("ValidUntil after the resume: %v from now, want in (0, %v]", left, ttl-jump)
	}
	start := time.Now()
	deadline := time.After(left + time.Second)
	for time.Until(l.ValidUntil()) <= ttl-jump {
		select {
		case <-l.Done():
			t.Fatalf("Done closed %v after a resume with %v left: %v; want a renewal", time.Since(start).Round(time.Millisecond), left, l.Err())
		case <-deadline:
			t.Fatalf("no renewal within %v of a resume with %v left", left+time.Second, left)
		case <-time.After(10 * time.Millisecond): // a poll of ValidUntil, which has no channel
		}
	}
	t.Logf("renewed within %v of the resume", time.Since(start).Round(time.Millisecond))
}
