package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
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
			waitGone(t, cli, etcdlock.KeysUnder(p).Locks())
		})
	}
}

// A role that lacks permission on the client's keys makes Lock and TryLock
// fail at once with an error naming the prefix to grant, and the cleanup
// of the denied attempts is not retried. (Before: "etcdlock: lock "denied":
// etcdserver: permission denied", naming no prefix; control with
// permanent() returning false: 24 requests in the 2 s window.)
func TestMissingPermission(t *testing.T) {
	testenv.Long(t, "it waits out refused requests and their backoff")
	t.Parallel()
	for _, tt := range []struct {
		name  string
		grant func(p string) string
	}{
		{"nothing granted under the prefix", func(string) string { return "/elsewhere/" }},
		{"only the lock queues granted", func(p string) string { return etcdlock.KeysUnder(p).Locks() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := prefix(t)
			e := secureEtcd(t, 2*time.Second, false, tt.grant(p))
			cli, in := e.faultyLocker(t, 20)
			c := newLocker(t, cli, etcdlock.WithTTL(9*time.Second), etcdlock.WithPrefix(p))
			for i := range 5 {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				_, err := c.Lock(ctx, "denied")
				cancel()
				checkPermissionError(t, "Lock", err, p)
				if i == 0 {
					t.Logf("Lock: %v", err)
					_, err = c.TryLock(t.Context(), "denied")
					checkPermissionError(t, "TryLock", err, p)
				}
			}
			before := kvRequests(in)
			time.Sleep(2 * time.Second) // a window for background retries to show
			if n := kvRequests(in) - before; n != 0 {
				t.Errorf("%d requests in the 2s after 5 denied Locks, want 0: cleanup retried after permission denied", n)
			}
		})
	}
}

func checkPermissionError(t *testing.T, op string, err error, p string) {
	t.Helper()
	want := "etcdctl role grant-permission ROLE readwrite " + p + " --prefix"
	var pe *etcdlock.PermissionError
	switch {
	case !errors.As(err, &pe) || pe.Prefix != p:
		t.Fatalf("%s without permission: got %v, want a *PermissionError for prefix %q", op, err, p)
	case !errors.Is(err, rpctypes.ErrPermissionDenied):
		t.Fatalf("%s without permission: got %v, want an error matching rpctypes.ErrPermissionDenied", op, err)
	case !strings.Contains(err.Error(), want):
		t.Fatalf("%s without permission: got %q, want it to say %q", op, err, want)
	}
}

// Without a client certificate, Lock fails with the transport error that
// keeps the connection from being established, not only the deadline.
func TestNoClientCertificate(t *testing.T) {
	t.Parallel()
	e := secureEtcd(t, 2*time.Second, true, prefix(t))
	cli := e.client(t, clientv3.Config{}, false) // no user: New would fail logging in
	c := newLocker(t, cli)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := c.Lock(ctx, "x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock without a client certificate: got %v, want an error matching context.DeadlineExceeded", err)
	}
	t.Logf("Lock: %v", err)
	// Usually "remote error: tls: certificate required"; when the client
	// writes before it reads the server's alert, "broken pipe".
	if !strings.Contains(err.Error(), "no connection to etcd: ") {
		t.Fatalf("Lock without a client certificate: got %q, want the transport error", err)
	}
}

// Elections, owner records, Observe, Run and Break need nothing beyond the
// prefix grant either (over TLS with a client certificate).
func TestPrefixGrantIsEnoughForElections(t *testing.T) {
	p := prefix(t)
	e := secureEtcd(t, 2*time.Second, true, p)
	c, err := etcdlock.New(e.locker(t, nil), etcdlock.WithTTL(2*time.Second), etcdlock.WithPrefix(p), etcdlock.WithOwner("svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	seen, err := c.Observe(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.Campaign(ctx, "leader", "v1")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if got := <-seen; got.Token != term.Token() || got.Owner != "svc" {
		t.Fatalf("Observe: got %#v, want the term %d", got, term.Token())
	}
	if err := term.Proclaim(ctx, "v2"); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	if l, err := c.Leader(ctx, "leader"); err != nil || l.Data != "v2" || l.TTL < 0 {
		t.Fatalf("Leader: got %#v, %v", l, err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := c.Run(ctx, "leader", "v3", func(context.Context, *etcdlock.Term) error { return errors.New("one term") }); err == nil || !strings.Contains(err.Error(), "one term") {
		t.Fatalf("Run: got %v, want lead's error", err)
	}
	l, err := c.Lock(ctx, "job", etcdlock.WithMetadata("m"))
	if err != nil {
		t.Fatal(err)
	}
	if q, err := c.Inspect(ctx, "job"); err != nil || q.Holder == nil || q.Holder.TTL < 0 || q.Holder.Data != "m" {
		t.Fatalf("Inspect: got %#v, %v", q, err)
	}
	if names, err := c.ListLocks(ctx); err != nil || len(names) != 1 {
		t.Fatalf("ListLocks: got %v, %v", names, err)
	}
	if _, err := c.Break(ctx, "job", l.Token()); err != nil {
		t.Fatalf("Break: %v", err)
	}
	waitClosed(t, l.Done(), 2*time.Second, "broken lock's Done")
}

// A role whose permission is revoked while it holds a lock makes Unlock and
// Close fail with the same *PermissionError as Lock, naming the prefix to
// grant. (They gave etcd's bare "permission denied".)
func TestUnlockAndCloseWithoutPermission(t *testing.T) {
	p := prefix(t)
	e := secureEtcd(t, 2*time.Second, false, p)
	c, err := etcdlock.New(e.locker(t, nil), etcdlock.WithTTL(9*time.Second), etcdlock.WithPrefix(p), etcdlock.WithCleanupTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	l := mustLock(t, c, "held")
	root := e.client(t, clientv3.Config{Username: "root", Password: rootPassword}, true)
	if _, err := root.RoleRevokePermission(t.Context(), "locker", p, clientv3.GetPrefixRangeEnd(p)); err != nil {
		t.Fatal(err)
	}
	checkPermissionError(t, "Unlock", l.Unlock(t.Context()), p)
	checkPermissionError(t, "Close", c.Close(t.Context()), p)
}
