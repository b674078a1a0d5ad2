package etcdlock_test

import (
	"errors"
	"fmt"
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
