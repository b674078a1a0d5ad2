package etcdlock_test

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Renewing the lease does not log in again: keepalives go on one
// long-lived stream, as with stock clientv3's KeepAlive. (Before: a stream,
// and a login, per renewal: 9 logins in 6 s with a 2 s lease.)
func TestNoLoginPerRenewal(t *testing.T) {
	testenv.Long(t, "it counts logins over several renewals of the lease")
	t.Parallel()
	e := secureEtcd(t, 2*time.Second, false, prefix(t))
	cli, in := e.faultyLocker(t, 19)
	c := newLocker(t, cli, etcdlock.WithTTL(2*time.Second))
	l := mustLock(t, c, "renewed")
	first := l.ValidUntil()
	for !l.ValidUntil().After(first) { // the first renewal opens the stream
		time.Sleep(10 * time.Millisecond)
	}
	first = l.ValidUntil()
	before, start := in.Calls("Auth/Authenticate"), time.Now()
	time.Sleep(6 * time.Second) // 9 renewals of a 2 s lease
	n := in.Calls("Auth/Authenticate") - before
	perMin := float64(n) / time.Since(start).Minutes()
	t.Logf("%d logins in %v (%.0f/min) with a %v lease", n, time.Since(start).Round(time.Millisecond), perMin, l.TTL())
	if !l.ValidUntil().After(first.Add(4 * time.Second)) {
		t.Fatalf("validity deadline moved %v in 6s, want renewals", l.ValidUntil().Sub(first))
	}
	if l.Err() != nil {
		t.Fatalf("Err: %v", l.Err())
	}
	if n != 0 {
		t.Errorf("%d logins (%.0f/min) while renewing a %v lease for 6s, want 0", n, perMin, l.TTL())
	}
	l.Unlock(t.Context())
}
