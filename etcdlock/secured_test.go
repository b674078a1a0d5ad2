package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// Tests against an etcd run as in production: authentication on, a role
// with readwrite on the lock prefix only, 2 s auth tokens, client TLS.

// A role granted exactly the prefix is all a client needs, over TLS with
// a client certificate too.
func TestPrefixGrantIsEnough(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[withTLS], func(t *testing.T) {
			p := prefix(t)
			e := secureEtcd(t, 2*time.Second, withTLS, p)
			cli := e.locker(t, nil)
			c, err := etcdlock.New(cli, etcdlock.WithTTL(2*time.Second), etcdlock.WithPrefix(p))
			if err != nil {
				t.Fatal(err)
			}
			l := mustLock(t, c, "a")
			if _, err := c.TryLock(t.Context(), "a"); !errors.Is(err, etcdlock.ErrLocked) {
				t.Fatalf("TryLock of a held lock: got %v, want ErrLocked", err)
			}
			tl, err := c.TryLock(t.Context(), "b")
			if err != nil {
				t.Fatalf("TryLock of a free lock: got %v, want the lock", err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if err := c.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !errors.Is(tl.Err(), etcdlock.ErrClosed) {
				t.Fatalf("Err of a lock held at Close: got %v, want ErrClosed", tl.Err())
			}
			waitGone(t, cli, p+"lock/")
		})
	}
}
