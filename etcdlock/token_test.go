package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A waiter whose watch stream's auth token expired does not loop on
// refused watches: it gets a working watch (a new stream, logged in afresh),
// sends nothing more while it waits, and is granted as soon as the holder
// unlocks. (Before: a refused watch and a read every second, the backoff's
// cap, and a handover up to a second late.)
func TestExpiredTokenWaiterWatches(t *testing.T) {
	testenv.Long(t, "waits out an auth token's expiry (about 8 s)")
	t.Parallel()
	e := secureEtcd(t, 2*time.Second, false, prefix(t))
	holder := newLocker(t, e.locker(t, nil))
	wcli, in := e.faultyLocker(t, 18)
	waiter := newLocker(t, wcli, etcdlock.WithTTL(9*time.Second))
	// An observer's watch, on the clientv3 stream the waiter's watches go
	// on too, keeps that stream open past the token it was opened with.
	// (Held locks' watches go on a stream of the Client's own: see
	// TestExpiredTokenHolderWatches.)
	if _, err := waiter.Observe(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // longer than the token's TTL, unused
	h := mustLock(t, holder, "w")
	granted := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(t.Context(), "w")
		if err == nil {
			l.Unlock(t.Context())
		}
		granted <- err
	}()
	waitQueued(t, e.locker(t, nil), h, 2)
	time.Sleep(time.Second) // time to get a working watch
	before, start := waiterRequests(in), time.Now()
	time.Sleep(4 * time.Second) // a window to count requests in
	n := waiterRequests(in) - before
	rate := float64(n) / time.Since(start).Seconds()
	t.Logf("waiter: %d reads and watches in %v (%.2f/s), %d logins in all", n, time.Since(start).Round(time.Millisecond), rate, in.Calls("Auth/Authenticate"))
	unlocked := time.Now()
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("waiter's Lock: %v", err)
	}
	handover := time.Since(unlocked)
	t.Logf("handover %v after the holder's Unlock", handover.Round(time.Millisecond))
	if n > 1 {
		t.Errorf("waiter sent %d reads and watches (%.2f/s) while waiting, want at most 1: no working watch", n, rate)
	}
	if handover > 300*time.Millisecond {
		t.Errorf("waiter granted %v after the holder's Unlock, want at most 300ms", handover)
	}
}

// A holder whose watch stream's auth token expired still watches its key:
// the monitor of a lock taken then does not loop on refused watches (before:
// about 1,400 refused watches and 1,400 reads a second), and a deletion of
// the key is reported.
func TestExpiredTokenHolderWatches(t *testing.T) {
	testenv.Long(t, "waits out an auth token's expiry (about 6 s)")
	t.Parallel()
	e := secureEtcd(t, 2*time.Second, false, prefix(t))
	cli, in := e.faultyLocker(t, 21)
	c := newLocker(t, cli, etcdlock.WithTTL(9*time.Second))
	a := mustLock(t, c, "a")    // its watch keeps the watch stream open
	time.Sleep(3 * time.Second) // longer than the token's TTL, unused
	b := mustLock(t, c, "b")
	time.Sleep(500 * time.Millisecond) // b's watch is created
	// Counted: reads, and watch streams opened. (Not the messages on the
	// stream: it carries a probe every TTL/3.)
	requests := func() int { return kvRequests(in) + in.Calls("Watch/Watch") }
	before, start := requests(), time.Now()
	time.Sleep(2 * time.Second) // a window to count requests in
	n := requests() - before
	t.Logf("holder: %d reads and watch streams in %v", n, time.Since(start).Round(time.Millisecond))
	if n > 1 {
		t.Errorf("holder sent %d reads and opened watch streams in %v, want at most 1: no working watch", n, time.Since(start).Round(time.Millisecond))
	}
	if _, err := cli.Delete(t.Context(), b.Key()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, b.Done(), 2*time.Second, "b's Done after its key was deleted")
	if !errors.Is(b.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("b's Err: got %v, want ErrKeyDeleted", b.Err())
	}
	a.Unlock(t.Context())
}
