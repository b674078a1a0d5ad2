package etcdlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// A deletion made while the stream hangs, compacted away before the next
// stream, whose read before it fails: the lock learns it from the read
// after the compacted watch.
func TestKeyWatchDeletionCompactedAway(t *testing.T) {
	fcli, in := faulty(t, 309)
	raw := etcdClient(t)
	c := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	l := mustLock(t, c, "compacted-away")
	other := mustLock(t, c, "stays")
	poll.Until(t, "the watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 2 && ok })
	in.HangStreams(reqfault.Method("Watch/Watch"))
	if _, err := raw.Delete(t.Context(), l.Key()); err != nil {
		t.Fatal(err)
	}
	var rev int64
	for i := range 3 {
		resp, err := raw.Put(t.Context(), fmt.Sprintf("unrelated/%s-%d", t.Name(), i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := raw.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the hung stream", func() bool { return in.Hung() > 0 })
	in.HangStreams(nil)
	in.Next(reads(l.Key()), reqfault.LostReply)
	etcdlock.EndKeyWatchStreamForTest(c)
	waitClosed(t, l.Done(), 5*time.Second, "Done")
	if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
	poll.Until(t, "the other watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	assertHeld(t, other)
}
