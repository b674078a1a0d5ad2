package etcdlock_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// maxOwnAllocs bounds etcdlock's own allocations in one uncontended
// Lock+Unlock (see TestLockUnlockAllocs): 13-18 measured after issue 50's
// cuts, 28-30 before them, so that undoing the cuts fails the test while
// the noise of two process-wide counts (a few each way) does not.
const maxOwnAllocs = 24

// TestLockUnlockAllocs holds etcdlock's own allocations in an uncontended
// Lock+Unlock (one Client, one name, no minimum hold) to maxOwnAllocs.
// testing.AllocsPerRun counts every allocation in the process: clientv3's
// and gRPC's for the two requests, and the embedded etcd server's for
// serving them (about 913 of about 927). So the test also counts the same
// requests sent by hand (shaped: plain clientv3 calls), and holds the
// difference, etcdlock's own, to the bound: a change of clientv3 or etcd
// moves both counts alike. The server's background work (about 6
// allocations per 10 ms idle) and a key watch that a slow Lock+Unlock may
// start (watchDelay) are the noise; each count is the lowest of three
// rounds. The test is not parallel, so that no other test's work is
// counted. Under the race detector the counts are higher, and the
// difference is about the same (14 in one run), which the same bound
// holds.
func TestLockUnlockAllocs(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli, etcdlock.WithTTL(10*time.Second))
	ctx := context.Background()
	var failed error
	lockUnlock := func() {
		l, err := c.Lock(ctx, "allocs")
		if err == nil {
			err = l.Unlock(ctx)
		}
		if err != nil && failed == nil {
			failed = err
		}
	}
	raw := newShaped(t, cli, prefix(t), "")
	shapedLockUnlock := func() {
		err := raw.lock(ctx)
		if err == nil {
			err = raw.unlock(ctx)
		}
		if err != nil && failed == nil {
			failed = err
		}
	}
	got, shape := math.Inf(1), math.Inf(1)
	for range 3 {
		got = min(got, testing.AllocsPerRun(100, lockUnlock)) // the first warm-up run grants the session
		shape = min(shape, testing.AllocsPerRun(100, shapedLockUnlock))
	}
	if failed != nil {
		t.Fatal(failed)
	}
	own := got - shape
	t.Logf("allocations per Lock+Unlock: %.0f; per the same requests sent by hand: %.0f; etcdlock's own: %.0f", got, shape, own)
	if own > maxOwnAllocs {
		t.Errorf("etcdlock's own allocations per Lock+Unlock: got %.0f (%.0f against %.0f for the requests sent by hand), want <= %d", own, got, shape, maxOwnAllocs)
	}
}
