package etcdlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

func TestLockUnlock(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	l := mustLock(t, c, "job")
	if !l.Token().Valid() {
		t.Fatalf("Token: got %d, want > 0", l.Token())
	}
	resp, err := cli.Get(t.Context(), l.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != int64(l.Token()) {
		t.Fatalf("key %q: got %v (%v), want it with create revision %d", l.Key(), resp.Kvs, err, l.Token())
	}
	if l.Err() != nil {
		t.Fatalf("Err while held: got %v, want nil", l.Err())
	}
	if until := l.ValidUntil(); !until.After(time.Now()) || until.After(time.Now().Add(l.TTL())) {
		t.Fatalf("ValidUntil: got %v from now, want within (0, %v]", time.Until(until), l.TTL())
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: got %v, want nil", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("second Unlock: got %v, want nil", err)
	}
	waitClosed(t, l.Done(), time.Second, "Done after Unlock")
	if !errors.Is(l.Err(), etcdlock.ErrUnlocked) {
		t.Fatalf("Err after Unlock: got %v, want ErrUnlocked", l.Err())
	}
	if ks := keys(t, cli, keysOf(t).Locks()); len(ks) != 0 {
		t.Fatalf("keys after Unlock: got %v, want none", ks)
	}
}

func TestGrantedTTLIsReported(t *testing.T) {
	c := newLocker(t, etcdClient(t), etcdlock.WithTTL(time.Nanosecond))
	l := mustLock(t, c, "ttl")
	defer l.Unlock(t.Context())
	if l.TTL() != time.Second { // the embedded server's minimum
		t.Fatalf("TTL: got %v, want 1s (granted, not the 1ns requested)", l.TTL())
	}
}

func TestTryLock(t *testing.T) {
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	l := mustLock(t, a, "try")
	_, err := b.TryLock(t.Context(), "try")
	if !errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryLock while held: got %v, want ErrLocked", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	l2, err := b.TryLock(t.Context(), "try")
	if err != nil {
		t.Fatalf("TryLock when free: got %v, want nil", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("tokens: got %d after %d, want increasing", l2.Token(), l.Token())
	}
	l2.Unlock(t.Context())
}

// TestFIFO checks waiters are served in arrival order.
func TestFIFO(t *testing.T) {
	cli := etcdClient(t)
	holder := newLocker(t, cli)
	l := mustLock(t, holder, "fifo")
	const n = 4
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		c := newLocker(t, cli)
		go func() {
			w, err := c.Lock(t.Context(), "fifo")
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- w.Unlock(context.Background())
		}()
		waitQueued(t, cli, l, i+2) // holder + i+1 waiters
	}
	l.Unlock(t.Context())
	for i := range n {
		if got := <-order; got != i {
			t.Fatalf("acquisition %d: got waiter %d, want %d", i, got, i)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// waitQueued polls until the lock's queue holds n keys.
func waitQueued(t *testing.T, cli *clientv3.Client, l *etcdlock.Lock, n int) {
	t.Helper()
	q := l.Key()[:strings.LastIndex(l.Key(), "/")+1]
	deadline := time.Now().Add(5 * time.Second)
	for len(keys(t, cli, q)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("queue %q: fewer than %d keys after 5s", q, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBadInput(t *testing.T) {
	cli := etcdClient(t)
	if _, err := etcdlock.New(nil); err == nil {
		t.Error("New(nil): got nil error, want one")
	}
	for _, tt := range []struct {
		name string
		opt  etcdlock.Option
	}{
		{"zero TTL", etcdlock.WithTTL(0)},
		{"negative TTL", etcdlock.WithTTL(-time.Second)},
		{"TTL over etcd's longest", etcdlock.WithTTL(etcdlock.MaxTTL + time.Second)},
		{"the longest Duration as TTL", etcdlock.WithTTL(math.MaxInt64)}, // its seconds, rounded up, overflowed: a 1 s lease
		{"empty prefix", etcdlock.WithPrefix("")},
		{"zero cleanup timeout", etcdlock.WithCleanupTimeout(0)},
		{"nil option", nil},
	} {
		if _, err := etcdlock.New(cli, tt.opt); !errors.Is(err, etcdlock.ErrInvalidOption) {
			t.Errorf("New with %s: got %v, want ErrInvalidOption", tt.name, err)
		}
	}
	c := newLocker(t, cli)
	for _, name := range []string{"", "a\nb", "nul\x00", "tab\t", "\xff", strings.Repeat("x", etcdlock.MaxNameLen+1)} {
		if _, err := c.Lock(t.Context(), name); !errors.Is(err, etcdlock.ErrInvalidName) {
			t.Errorf("Lock(%q): got %v, want ErrInvalidName", name, err)
		}
		if _, err := c.TryLock(t.Context(), name); !errors.Is(err, etcdlock.ErrInvalidName) {
			t.Errorf("TryLock(%q): got %v, want ErrInvalidName", name, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Lock(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Lock with cancelled ctx: got %v, want context.Canceled", err)
	}
	//lint:ignore SA1012 checking the nil-context error
	if _, err := c.Lock(nil, "x"); err == nil { //nolint:staticcheck
		t.Error("Lock(nil ctx): got nil error, want one")
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(t.Context(), "x"); !errors.Is(err, etcdlock.ErrClosed) {
		t.Errorf("Lock after Close: got %v, want ErrClosed", err)
	}
}

// TestLockIsHolder checks a Lock plugs into fence.Guard and the guard
// refuses once the lock is released.
func TestLockIsHolder(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	l := mustLock(t, c, "guard")
	g, err := fence.NewGuard(l)
	if err != nil {
		t.Fatal(err)
	}
	s := fence.NewMemoryStore()
	if err := g.Put(t.Context(), s, "k", []byte("v")); err != nil {
		t.Fatalf("Put while held: got %v, want nil", err)
	}
	l.Unlock(t.Context())
	if err := g.Put(t.Context(), s, "k", []byte("v2")); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Put after Unlock: got %v, want fence.ErrLockLost", err)
	}
}

func TestCloseEndsLocks(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	l := mustLock(t, c, "close")
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Done(), time.Second, "Done after Close")
	if !errors.Is(l.Err(), etcdlock.ErrClosed) {
		t.Fatalf("Err after Close: got %v, want ErrClosed", l.Err())
	}
	resp, err := cli.Get(t.Context(), l.Key())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key after Close: got %d kvs (%v), want none (lease revoked)", len(resp.Kvs), err)
	}
}
