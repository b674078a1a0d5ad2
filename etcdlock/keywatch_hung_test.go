package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// lockMany takes n locks named prefix-0..n-1 (padded to long names, so that
// their watch creations are large) with a few goroutines.
func lockMany(t *testing.T, c *etcdlock.Client, name string, n int) []*etcdlock.Lock {
	t.Helper()
	pad := strings.Repeat("x", 200)
	locks := make([]*etcdlock.Lock, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				l, err := c.Lock(ctx, fmt.Sprintf("%s-%s-%d", name, pad, i))
				cancel()
				if err != nil {
					errs <- err
					return
				}
				locks[i] = l
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Lock: %v", err)
	}
	return locks
}

// A hung watch stream that thousands of creations are sent on is found out,
// and the deletion it hid reported: its answers back up, etcd stops reading
// it and the writer blocks in Send, but the probes have a goroutine of
// their own, which the blocked writer cannot keep from the probe's tick.
// TTL 9s: probes every 3s, so the writer is blocked (after ~4,000
// creations, about 2s) before the first probe after the hang is checked.
func TestKeyWatchHungStreamManyCreations(t *testing.T) {
	testenv.Long(t, "many watch creations on a hung stream (about 13 s)")
	fcli, in := faulty(t, 301)
	c := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second))
	admin := newLocker(t, etcdClient(t))
	l := mustLock(t, c, "victim")
	poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	in.HangStreams(reqfault.Method("Watch/Watch"))
	defer in.HangStreams(nil)
	start := time.Now()
	lockMany(t, c, "many", 6000)
	time.Sleep(200 * time.Millisecond) // past watchDelay: every creation queued
	t.Logf("6000 locks in %v; %d watch messages sent", time.Since(start), in.Sent("Watch/Watch"))
	start = time.Now()
	if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
		t.Fatal(err)
	}
	took := waitClosed(t, l.Done(), 10*time.Second, "Done after Break on a hung stream").Sub(start)
	if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
	t.Logf("reported after %v", took)
}
