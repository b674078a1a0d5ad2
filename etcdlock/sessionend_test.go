package etcdlock_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/reqfault"
)

// A release whose reply was lost is retried in the background; when the
// Client is closed before the retry, the lock ends with ErrClosed (or
// ErrUnlocked, had the retry landed), never with a loss of no cause.
func TestRetriedUnlockEndsWithClose(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, opts := withTelemetry(t)
			fcli, inj := faulty(t, uint64(i))
			c := newLocker(t, fcli, opts...)
			l := mustLock(t, c, "r")
			inj.Next(deletes(l.Key()), reqfault.LostReply)
			if err := l.Unlock(t.Context()); err == nil {
				t.Fatal("Unlock whose reply was lost: got nil, want an error")
			}
			if err := c.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, l.Done(), time.Second, "Done after Close")
			if err := l.Err(); !errors.Is(err, etcdlock.ErrClosed) && !errors.Is(err, etcdlock.ErrUnlocked) {
				t.Fatalf("Err: got %#v, want ErrClosed or ErrUnlocked", err)
			}
		})
	}
}

// Close racing the end of its session by another goroutine (an Unlock that
// finds the lease gone) returns only once the session closed every lock's
// Done, also of locks held WithoutKeyWatch, which have no monitor Close
// would wait for.
func TestCloseWaitsForSessionEnd(t *testing.T) {
	direct := etcdClient(t)
	for round := range 5 {
		c := newLocker(t, direct, etcdlock.WithTTL(9*time.Second))
		var (
			mu    sync.Mutex
			locks []*etcdlock.Lock
			wg    sync.WaitGroup
		)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					l, err := c.Lock(t.Context(), fmt.Sprintf("r%d-%d-%d", round, w, i), etcdlock.WithoutKeyWatch())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					locks = append(locks, l)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if _, err := direct.Revoke(t.Context(), locks[0].Lease()); err != nil {
			t.Fatal(err)
		}
		go locks[0].Unlock(t.Context()) // finds the lease gone: ends the session
		waitClosed(t, locks[len(locks)/2].Done(), 5*time.Second, "a lock's Done")
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, l := range locks {
			select {
			case <-l.Done():
			default:
				open++
			}
		}
		if open > 0 {
			t.Fatalf("round %d: %d of %d locks' Done open after Close returned", round, open, len(locks))
		}
	}
}
