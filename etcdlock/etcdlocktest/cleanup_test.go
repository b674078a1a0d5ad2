package etcdlocktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

// TestPartitionedCleanup runs the README's test-kit pattern, the client
// still partitioned when the test ends, with the etcdlock.Client's Close
// registered with t.Cleanup before (as in the README) and after the
// Partition: the partition is healed as the test ends, before any cleanup,
// so Close's revoke is answered and the cleanups take far less than the
// Close timeout (5 s) they would wait out on a still-partitioned client.
func TestPartitionedCleanup(t *testing.T) {
	for _, closeAfterPartition := range []bool{false, true} {
		name := map[bool]string{false: "Close registered before Partition", true: "Close registered after Partition"}[closeAfterPartition]
		var bodyEnd time.Time
		start := time.Now()
		t.Run(name, func(t *testing.T) {
			srv := etcdlocktest.New(t)
			cli := srv.Client(t)
			locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			closeLocks := func() { locks.Close(context.Background()) }
			if !closeAfterPartition {
				t.Cleanup(closeLocks)
			}
			lock, err := locks.TryLock(t.Context(), "report")
			if err != nil {
				t.Fatal(err)
			}
			srv.Partition(cli)
			if closeAfterPartition {
				t.Cleanup(closeLocks)
			}
			<-lock.Done()
			bodyEnd = time.Now()
		})
		cleanup, total := time.Since(bodyEnd), time.Since(start)
		t.Logf("%s: %v for the test, %v of it in cleanups", name, total.Round(time.Millisecond), cleanup.Round(time.Millisecond))
		if bodyEnd.IsZero() {
			t.Fatal("the test body did not finish")
		}
		if limit := 2 * time.Second; cleanup > limit {
			t.Errorf("%s: cleanups took %v, want under %v (the partition healed before Close)", name, cleanup, limit)
		}
	}
}
