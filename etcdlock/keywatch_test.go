package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/reqfault"
)

// A lock held WithoutKeyWatch does not learn that someone else deleted its
// key (a watched lock broken at the same time does), and learns it from
// Unlock's error.
func TestWithoutKeyWatchMissesBreak(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	admin := newLocker(t, etcdClient(t))
	watched := mustLock(t, c, "watched")
	unwatched, err := c.Lock(t.Context(), "unwatched", etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	// The watch starts from the revision after the key's creation, so the
	// watched lock sees a deletion also before its watch starts.
	for _, l := range []*etcdlock.Lock{watched, unwatched} {
		if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
			t.Fatalf("Break(%s): %v", l.Name(), err)
		}
	}
	waitClosed(t, watched.Done(), 5*time.Second, "watched lock's Done after Break")
	select {
	case <-unwatched.Done():
		t.Fatalf("unwatched lock's Done closed after Break: %v", unwatched.Err())
	default:
	}
	if err := unwatched.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Unlock: got %v, want ErrKeyDeleted", err)
	}
	waitClosed(t, unwatched.Done(), time.Second, "unwatched lock's Done after Unlock")
	if err := unwatched.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
}

// Losing the session closes an unwatched lock's Done as a watched one's,
// by the validity deadline.
func TestWithoutKeyWatchSessionLoss(t *testing.T) {
	cli, proxy := proxied(t)
	c := newLocker(t, cli)
	l, err := c.Lock(t.Context(), "cut", etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	defer proxy.Heal()
	closed := waitClosed(t, l.Done(), 5*time.Second, "Done after the cut")
	if late := closed.Sub(l.ValidUntil()); late > time.Second {
		t.Errorf("Done closed %v after ValidUntil", late)
	}
	if err := l.Err(); !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("Err: got %v, want ErrLost", err)
	}
}

// An unwatched lock whose release lost its reply learns the outcome from
// the background retry (there is no watch to see the deletion): Done
// closes with ErrUnlocked and the next Unlock returns nil.
func TestWithoutKeyWatchLostReleaseReply(t *testing.T) {
	fcli, in := faulty(t, 11)
	c := newLocker(t, fcli)
	l, err := c.Lock(t.Context(), "lost-reply", etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	in.Next(deletes(l.Key()), reqfault.LostReply)
	if err := l.Unlock(t.Context()); err == nil {
		t.Fatal("Unlock whose reply was lost: got nil, want an error")
	}
	waitClosed(t, l.Done(), 2*time.Second, "Done after the background release")
	if err := l.Err(); !errors.Is(err, etcdlock.ErrUnlocked) {
		t.Fatalf("Err: got %v, want ErrUnlocked", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("second Unlock: got %v, want nil", err)
	}
}
