package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// A write through the lock's Guard, once Do has ended the work's context
// for the lock's loss, says the lock was lost (fence.ErrLockLost), not a
// bare context.Canceled, and sends nothing; context.Cause names the loss.
func TestDoGuardSaysLockLost(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
	breaker := newLocker(t, cli)
	store := fence.NewMemoryStore()
	err := c.Do(t.Context(), "job", func(ctx context.Context, l *etcdlock.Lock) error {
		g, err := fence.NewGuard(l)
		if err != nil {
			return err
		}
		waitWatched(t, c)
		if _, err := breaker.Break(t.Context(), "job", l.Token()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the work's context still open 5s after its lock was broken")
		}
		werr := g.Put(ctx, store, "k", []byte("late"))
		if !errors.Is(werr, fence.ErrLockLost) {
			t.Errorf("Guard.Put after the loss: got %v, want an error matching fence.ErrLockLost", werr)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, etcdlock.ErrKeyDeleted) {
			t.Errorf("context.Cause: got %v, want ErrKeyDeleted", cause)
		}
		return werr
	})
	if !errors.Is(err, fence.ErrLockLost) || !errors.Is(err, etcdlock.ErrLost) {
		t.Errorf("Do: got %v, want the loss and the refused write", err)
	}
	if _, gerr := store.Get(t.Context(), "k"); !errors.Is(gerr, fence.ErrNotFound) {
		t.Errorf("the store after the refused write: got %v, want nothing written", gerr)
	}
}

// WithWait bounds the wait for the lock and not the work: a Do that cannot
// get the lock in time gives up with context.DeadlineExceeded, runs
// nothing and leaves no key; one that gets it runs its work past the bound.
func TestDoWithWait(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	holder, err := c.Lock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	err = c.Do(t.Context(), "job", func(context.Context, *etcdlock.Lock) error { ran = true; return nil }, etcdlock.WithWait(200*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Do while held elsewhere, WithWait(200ms): got %v (ran %v), want context.DeadlineExceeded and no run", err, ran)
	}
	if ks := keys(t, cli, keysOf(t).Lock("job")); len(ks) != 1 {
		t.Errorf("after the wait gave up: keys %v, want the holder's alone", ks)
	}
	if err := holder.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = c.Do(t.Context(), "job", func(ctx context.Context, _ *etcdlock.Lock) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(400 * time.Millisecond): // twice the wait's bound
			return nil
		}
	}, etcdlock.WithWait(200*time.Millisecond))
	if err != nil {
		t.Errorf("Do whose work outlasts WithWait's bound: got %v, want nil", err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := c.Lock(t.Context(), "job", etcdlock.WithWait(d)); !errors.Is(err, etcdlock.ErrInvalidOption) {
			t.Errorf("WithWait(%v): got %v, want ErrInvalidOption", d, err)
		}
	}
}

// MultiLock.Claims gives each lock's name and token, in name order.
func TestMultiLockClaims(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	m, err := c.LockAll(t.Context(), []string{"b", "a"}, etcdlock.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(context.WithoutCancel(t.Context()))
	cs := m.Claims()
	if len(cs) != 2 || cs[0].Resource != "a" || cs[1].Resource != "b" || cs[0].Token != m.Lock("a").Token() || cs[1].Token != m.Lock("b").Token() {
		t.Errorf("Claims: got %v, want a and b with their locks' tokens", cs)
	}
	var nilM *etcdlock.MultiLock
	if cs := nilM.Claims(); cs != nil {
		t.Errorf("Claims of a nil MultiLock: got %v, want none", cs)
	}
}

// LockAll's WithWait bounds the wait for the whole set, once: the error
// says so once and names the lock it waited for.
func TestLockAllWithWaitBoundsTheSet(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	held := mustLock(t, newLocker(t, cli), "b")
	defer held.Unlock(context.WithoutCancel(t.Context()))
	start := time.Now()
	_, err := newLocker(t, cli).LockAll(t.Context(), []string{"a", "b"}, etcdlock.WithWait(300*time.Millisecond))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || strings.Count(err.Error(), "(WithWait)") != 1 || !strings.Contains(err.Error(), `"b": not acquired within 300ms (WithWait)`) {
		t.Fatalf("LockAll with b held, WithWait(300ms): got %v, want one bound, naming b", err)
	}
	if took > 5*time.Second {
		t.Errorf("LockAll with WithWait(300ms) returned after %v", took)
	}
}
