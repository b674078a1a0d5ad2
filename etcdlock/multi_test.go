package etcdlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestLockAllOverlapping has callers take overlapping sets of names in
// random orders: none deadlocks, and no name is held twice at once.
func TestLockAllOverlapping(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	names := []string{"a", "b", "c", "d"}
	var holders [4]atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 6 {
		c := newLocker(t, cli)
		rng := rand.New(rand.NewPCG(uint64(g), 1))
		wg.Go(func() {
			for range 10 {
				set := slicesShuffled(rng, names)[:2+rng.IntN(3)]
				m, err := c.LockAll(ctx, set)
				if err != nil {
					t.Errorf("LockAll(%v): %v", set, err)
					return
				}
				for _, n := range set {
					if holders[n[0]-'a'].Add(1) != 1 {
						t.Errorf("%s held twice", n)
					}
				}
				time.Sleep(time.Millisecond) // work under the locks
				for _, n := range set {
					holders[n[0]-'a'].Add(-1)
				}
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("LockAll callers did not finish in 30 s: deadlocked")
	}
}

func slicesShuffled(rng *rand.Rand, s []string) []string {
	s = append([]string(nil), s...)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// TestLockAllCancelledLeavesNothing checks that a LockAll that cannot take
// every name releases those it took.
func TestLockAllCancelledLeavesNothing(t *testing.T) {
	cli := etcdClient(t)
	other := mustLock(t, newLocker(t, cli), "m2")
	defer other.Unlock(t.Context())
	c := newLocker(t, cli)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := c.LockAll(ctx, []string{"m3", "m1", "m2"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockAll with m2 held: got %v, want DeadlineExceeded", err)
	}
	ks := keys(t, cli, keysOf(t).Locks())
	if len(ks) != 1 || !strings.Contains(ks[0], "/m2/") {
		t.Fatalf("keys after the failed LockAll: %v, want only m2's holder", ks)
	}
	m, err := c.LockAll(t.Context(), []string{"m1", "m3", "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Locks()) != 2 || m.Lock("m1") == nil || m.Lock("m2") != nil {
		t.Fatalf("Locks: got %v, want m1 and m3", m.Locks())
	}
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(m.Err(), etcdlock.ErrUnlocked) {
		t.Fatalf("Err after Unlock: %v", m.Err())
	}
}

// TestLockAllDoneOnAnyLoss checks that Done closes when one of the locks
// is lost, and Err names it.
func TestLockAllDoneOnAnyLoss(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	m, err := c.LockAll(t.Context(), []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(t.Context(), m.Lock("y").Key()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, m.Done(), 5*time.Second, "MultiLock Done after y's key was deleted")
	if err := m.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) || !strings.Contains(err.Error(), `"y"`) {
		t.Fatalf("Err: got %v, want y's ErrKeyDeleted", err)
	}
	if err := m.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("Unlock after the loss: got %v, want ErrLost (y's)", err)
	}
	if m.Lock("x").Err() == nil {
		t.Fatal("x still held after Unlock")
	}
}

func TestLockAllInvalid(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	if _, err := c.LockAll(t.Context(), nil); !errors.Is(err, etcdlock.ErrInvalidArgument) {
		t.Errorf("LockAll(nil): got %v", err)
	}
	if _, err := c.LockAll(t.Context(), []string{"ok", "a\nb"}); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Errorf("LockAll with a newline: got %v", err)
	}
}
