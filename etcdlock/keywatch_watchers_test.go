package etcdlock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// etcd's watchers follow the held locks: after Unlock, Break, a stream
// replaced and Close, none is left behind on the member.
func TestKeyWatchLeavesNoServerWatchers(t *testing.T) {
	testenv.Long(t, "it waits for the server to drop watchers, several seconds")
	const n = 200
	srv := etcdlocktest.New(t)
	cli := etcdClient(t, srv.Endpoints()...)
	c := newLocker(t, cli, etcdlock.WithTTL(3*time.Second))
	admin := newLocker(t, etcdClient(t, srv.Endpoints()...))
	var locks []*etcdlock.Lock
	for i := range n {
		locks = append(locks, mustLock(t, c, fmt.Sprintf("w-%d", i)))
	}
	poll.Until(t, "the watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == n && ok })
	awaitWatchers(t, srv, 0, n)
	for _, l := range locks[:50] {
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	awaitWatchers(t, srv, 0, n-50)
	for _, l := range locks[50:100] {
		if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range locks[50:100] {
		waitClosed(t, l.Done(), 3*time.Second, "Done after Break")
	}
	awaitWatchers(t, srv, 0, n-100)
	for i, l := range locks[100:150] {
		if i%10 == 0 {
			etcdlock.EndKeyWatchStreamForTest(c)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the watches again", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == n-150 && ok })
	awaitWatchers(t, srv, 0, n-150)
	for i := range 60 { // holds around watchDelay: unlocked before, while or after their watch is created
		l := mustLock(t, c, fmt.Sprintf("short-%d", i%5))
		time.Sleep(time.Duration(40+i%25) * time.Millisecond)
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	awaitWatchers(t, srv, 0, n-150)
	c.Close(t.Context())
	awaitWatchers(t, srv, 0, 0)
}
