package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

var errWork = errors.New("the work failed")

// Do runs the work under the lock and releases it; the work's error is
// Do's.
func TestDoRunsAndReleases(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	for _, want := range []error{nil, errWork} {
		var token fence.Token
		err := c.Do(t.Context(), "job", func(ctx context.Context, l *etcdlock.Lock) error {
			token = l.Token()
			return want
		})
		if err != want {
			t.Errorf("Do: got %v, want %v", err, want)
		}
		if token <= 0 {
			t.Errorf("the work saw token %d, want a positive one", token)
		}
		if ks := keys(t, cli, keysOf(t).Lock("job")); len(ks) != 0 {
			t.Errorf("after Do: keys %v, want none", ks)
		}
	}
}

// The work's context ends as soon as the lock is lost, with the loss as its
// cause, and Do says the work's result came from a hold that ended early.
func TestDoEndsWorkOnLoss(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
	breaker := newLocker(t, cli)
	err := c.Do(t.Context(), "job", func(ctx context.Context, l *etcdlock.Lock) error {
		waitWatched(t, c)
		if _, err := breaker.Break(t.Context(), "job", l.Token()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the work's context still open 5s after its lock was broken")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, etcdlock.ErrKeyDeleted) {
			t.Errorf("cause: got %v, want ErrKeyDeleted", cause)
		}
		return errWork
	})
	if !errors.Is(err, etcdlock.ErrLost) || !errors.Is(err, etcdlock.ErrKeyDeleted) || !errors.Is(err, errWork) {
		t.Errorf("Do: got %v, want ErrLost, ErrKeyDeleted and the work's error", err)
	}
}

// Cut off from etcd, the work's context ends by the validity deadline.
func TestDoEndsWorkAtValidityDeadline(t *testing.T) {
	t.Parallel()
	pcli, proxy := proxied(t)
	c := newLocker(t, pcli, etcdlock.WithCleanupTimeout(200*time.Millisecond))
	err := c.Do(t.Context(), "job", func(ctx context.Context, l *etcdlock.Lock) error {
		proxy.Cut()
		defer proxy.Heal()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the work's context still open 5s after the connection was cut (TTL 1s)")
		}
		if late := time.Since(l.ValidUntil()); late > 500*time.Millisecond {
			t.Errorf("the work's context ended %v after the validity deadline", late)
		}
		return nil
	})
	if !errors.Is(err, etcdlock.ErrValidityExpired) {
		t.Errorf("Do: got %v, want ErrValidityExpired", err)
	}
}

// A panic in the work releases the lock and goes on.
func TestDoPanicReleases(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the work's panic", r)
			}
		}()
		c.Do(t.Context(), "job", func(context.Context, *etcdlock.Lock) error { panic("boom") })
		t.Error("Do returned after the work panicked")
	}()
	if ks := keys(t, cli, keysOf(t).Lock("job")); len(ks) != 0 {
		t.Errorf("after the panic: keys %v, want none", ks)
	}
}

// When the lock is not acquired, the work does not run and Do says why.
func TestDoNotAcquired(t *testing.T) {
	cli := etcdClient(t)
	c, other := newLocker(t, cli), newLocker(t, cli)
	held := mustLock(t, other, "job")
	defer held.Unlock(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	ran := false
	err := c.Do(ctx, "job", func(context.Context, *etcdlock.Lock) error { ran = true; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Errorf("Do on a held lock: got %v (ran %v), want DeadlineExceeded, not run", err, ran)
	}
	if err := c.Do(t.Context(), "job", nil); !errors.Is(err, etcdlock.ErrInvalidArgument) {
		t.Errorf("Do with a nil function: got %v, want ErrInvalidArgument", err)
	}
}

// waitWatched waits until every held lock of c has its key watched.
func waitWatched(t *testing.T, c *etcdlock.Client) {
	t.Helper()
	poll.Until(t, "the lock's key watched", func() bool { n, ok := etcdlock.KeyWatchesForTest(c); return n > 0 && ok })
}

// Do runs work under a lock: its context ends if the lock is lost, and the
// lock is released when it returns.
func ExampleClient_Do() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-do/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	store := fence.NewMemoryStore()
	err = locks.Do(context.Background(), "nightly-report", func(ctx context.Context, lock *etcdlock.Lock) error {
		// ctx ends when the lock is lost; the guard carries its token.
		guard, err := fence.NewGuard(lock)
		if err != nil {
			return err
		}
		return guard.Do(ctx, func(ctx context.Context, token fence.Token) error {
			return store.Put(ctx, "report", token, []byte("done"))
		})
	})
	fmt.Println("work:", err)
	// Output: work: <nil>
}
