package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A Client holding thousands of watched locks on a connection that stalls
// (its watch stream's writer blocked in Send, its reader in Recv, a refresh
// under way) loses them all by the validity deadline, and Close returns
// soon after its context ends.
func TestKeyWatchStalledConnectionClose(t *testing.T) {
	testenv.Long(t, "it waits out a stalled connection")
	t.Parallel()
	const n = 3000
	_, proxy, c := faultyProxied(t, 307, time.Second)
	locks := lockMany(t, c, "stall", n)
	poll.Until(t, "the watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == n && ok })
	proxy.Cut()
	defer proxy.Heal()
	etcdlock.EndKeyWatchStreamForTest(c) // the read before the next stream hangs on the cut
	for _, l := range locks {
		waitClosed(t, l.Done(), 5*time.Second, "Done after the cut")
		if late := time.Since(l.ValidUntil()); late > time.Second {
			t.Fatalf("%s: Done closed %v after ValidUntil", l.Name(), late)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.Close(ctx) }()
	select {
	case err := <-closed:
		took := time.Since(start)
		t.Logf("Close returned %v after %v", err, took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("Close returned %v after it was called with a 100ms context, want within 2s", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close not returned 10s after it was called on a stalled connection")
	}
}
