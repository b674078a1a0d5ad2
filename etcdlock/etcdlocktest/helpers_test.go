package etcdlocktest_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

// locker returns a client of srv and an etcdlock client on it with the
// given TTL, closed when the test ends.
func locker(t *testing.T, srv *etcdlocktest.Server, ttl time.Duration) (*clientv3.Client, *etcdlock.Client) {
	t.Helper()
	cli := srv.Client(t)
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		locks.Close(ctx)
	})
	return cli, locks
}

func mustLock(t *testing.T, locks *etcdlock.Client, name string) *etcdlock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := locks.Lock(ctx, name)
	if err != nil {
		t.Fatalf("Lock(%q): got %v, want nil", name, err)
	}
	return l
}

// waitDone waits until l's Done closes, failing the test after d, and
// returns how long it took.
func waitDone(t *testing.T, l *etcdlock.Lock, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("Done of %q: not closed after %v", l.Name(), d)
		return 0
	}
}

// assertHeld fails the test if l's Done is closed.
func assertHeld(t *testing.T, l *etcdlock.Lock) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("lock %q: got lost (%v), want held", l.Name(), l.Err())
	default:
	}
}
