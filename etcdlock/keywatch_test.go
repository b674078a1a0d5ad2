package etcdlock_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
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
	t.Parallel()
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

// One Client watches the keys of all its held locks on one stream, with no
// goroutine per lock, and every one of them learns of its key's deletion.
func TestKeyWatchOneStreamForAll(t *testing.T) {
	const n = 200
	fcli, in := faulty(t, 21)
	c := newLocker(t, fcli)
	admin := newLocker(t, etcdClient(t))
	first := mustLock(t, c, "one-stream-0")
	poll.Until(t, "the first lock's watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	base := runtime.NumGoroutine()
	locks := []*etcdlock.Lock{first}
	for i := 1; i < n; i++ {
		locks = append(locks, mustLock(t, c, fmt.Sprintf("one-stream-%d", i)))
	}
	poll.Until(t, "every lock's watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == n && ok })
	if g := runtime.NumGoroutine() - base; g > 10 {
		t.Errorf("%d more goroutines with %d locks watched than with one, want a few at most", g, n)
	}
	if s := in.Calls("Watch/Watch"); s != 1 {
		t.Errorf("%d watch streams opened for %d locks, want 1", s, n)
	}
	for _, l := range locks {
		if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
			t.Fatalf("Break(%s): %v", l.Name(), err)
		}
	}
	for _, l := range locks {
		waitClosed(t, l.Done(), 5*time.Second, "Done after Break of "+l.Name())
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("%s: Err: got %v, want ErrKeyDeleted", l.Name(), err)
		}
	}
	poll.Until(t, "no watch left", func() bool { k, _ := etcdlock.KeyWatchesForTest(c); return k == 0 })
}

// Unlock removes the lock's watch: after many short and long holds no
// watch is left behind on the client.
func TestKeyWatchUnlockRemoves(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	for i := range 20 {
		l := mustLock(t, c, fmt.Sprintf("removes-%d", i%3))
		if i%2 == 0 {
			poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if k, _ := etcdlock.KeyWatchesForTest(c); k != 0 {
			t.Fatalf("after Unlock %d: %d watches, want 0", i, k)
		}
		if err := l.Err(); !errors.Is(err, etcdlock.ErrUnlocked) {
			t.Fatalf("Err after Unlock: %v", err)
		}
	}
}

// A deletion made while the watch stream delivers nothing (hung, then
// ended, as when its member goes away) is reported once a new stream
// replays the key's history from its creation (the read before the new
// stream fails here).
func TestKeyWatchDeletionWhileStreamDown(t *testing.T) {
	fcli, in := faulty(t, 22)
	c := newLocker(t, fcli)
	admin := newLocker(t, etcdClient(t))
	l := mustLock(t, c, "stream-down")
	poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	in.HangStreams(reqfault.Method("Watch/Watch"))
	if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the hung stream to drop the deletion", func() bool { return in.Hung() > 0 })
	select {
	case <-l.Done():
		t.Fatalf("Done closed while the stream hung: %v", l.Err())
	default:
	}
	in.HangStreams(nil)
	in.Next(reads(l.Key()), reqfault.LostReply) // so that the replay, not the refresh, tells
	etcdlock.EndKeyWatchStreamForTest(c)
	waitClosed(t, l.Done(), 5*time.Second, "Done after the new stream")
	if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
}

// Before a new stream, the watcher reads the watched keys (one
// transaction per 64) and watches them from the revision read: a lock whose
// key was deleted meanwhile learns it from the read.
func TestKeyWatchRefreshBeforeNewStream(t *testing.T) {
	fcli, in := faulty(t, 25)
	c := newLocker(t, fcli)
	admin := newLocker(t, etcdClient(t))
	var locks []*etcdlock.Lock
	for i := range 100 {
		locks = append(locks, mustLock(t, c, fmt.Sprintf("refresh-%d", i)))
	}
	poll.Until(t, "the watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 100 && ok })
	in.HangStreams(reqfault.Method("Watch/Watch"))
	gone := locks[:10]
	for _, l := range gone {
		if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the hung stream to drop the deletions", func() bool { return in.Hung() > 0 })
	in.HangStreams(nil)
	reads, creates := in.Calls("KV/Txn"), in.Sent("Watch/Watch")
	etcdlock.EndKeyWatchStreamForTest(c)
	for _, l := range gone {
		waitClosed(t, l.Done(), 5*time.Second, "Done of "+l.Name())
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("%s: Err: got %v, want ErrKeyDeleted", l.Name(), err)
		}
	}
	poll.Until(t, "the other watches again", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 90 && ok })
	if n := in.Calls("KV/Txn") - reads; n < 2 || n > 4 {
		t.Errorf("%d transactions to read 100 keys, want 2 (and a Break's worth of slack)", n)
	}
	if n := in.Sent("Watch/Watch") - creates; n < 90 {
		t.Errorf("%d watch requests on the new stream, want at least 90", n)
	}
	for _, l := range locks[10:] {
		if err := l.Err(); err != nil {
			t.Fatalf("%s: Err: %v", l.Name(), err)
		}
	}
}

// When the read before a new stream fails and the new stream finds the
// watch's start revision compacted, the lock reads its key again, watches
// on from there, and still learns of a later deletion; it is not taken for
// lost.
func TestKeyWatchCompactedOnNewStream(t *testing.T) {
	fcli, in := faulty(t, 23)
	raw := etcdClient(t)
	c := newLocker(t, fcli)
	admin := newLocker(t, raw)
	l := mustLock(t, c, "compacted")
	poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	var rev int64
	for i := range 5 {
		resp, err := raw.Put(t.Context(), fmt.Sprintf("unrelated/compacted-%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := raw.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	in.Next(reads(l.Key()), reqfault.LostReply)
	gets := in.Calls("KV/Range")
	etcdlock.EndKeyWatchStreamForTest(c)
	poll.Until(t, "the lock's read of its key", func() bool { return in.Calls("KV/Range") > gets })
	poll.Until(t, "the watch again", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	if err := l.Err(); err != nil {
		t.Fatalf("Err after the compaction: %v", err)
	}
	if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Done(), 5*time.Second, "Done after Break")
	if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
}

// reads matches transactions that only read, among them key.
func reads(key string) reqfault.Match {
	return func(method string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok || len(txn.Success) == 0 {
			return false
		}
		found := false
		for _, op := range txn.Success {
			r := op.GetRequestRange()
			if r == nil {
				return false
			}
			found = found || string(r.Key) == key
		}
		return found
	}
}

// A watch created on a stream whose auth token etcd no longer accepts (a
// simple token unused for its TTL) is refused; the watcher opens a new
// stream, logged in afresh, creates every watch again on it, and deletions
// of both the new and the older lock's keys are reported.
func TestKeyWatchExpiredTokenStream(t *testing.T) {
	testenv.Long(t, "it waits for an auth token to expire")
	t.Parallel()
	p := prefix(t)
	sec := secureEtcd(t, time.Second, false, p)
	root := sec.client(t, clientv3.Config{Username: "root", Password: rootPassword}, false)
	cli, in := sec.faultyLocker(t, 24)
	c := newLockerAt(t, cli, p, etcdlock.WithTTL(9*time.Second))
	old := mustLock(t, c, "old")
	poll.Until(t, "the first watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	streams := in.Calls("Watch/Watch")
	time.Sleep(2 * time.Second) // not synchronisation: the token's unused TTL passes
	fresh := mustLock(t, c, "fresh")
	poll.Until(t, "a new stream", func() bool { return in.Calls("Watch/Watch") > streams })
	poll.Until(t, "both watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 2 && ok })
	logins := in.Calls("Auth/Authenticate")
	for _, l := range []*etcdlock.Lock{fresh, old} {
		if _, err := root.Delete(t.Context(), l.Key()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 3*time.Second, "Done of "+l.Name()+" after root deleted its key")
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("%s: Err: got %v, want ErrKeyDeleted", l.Name(), err)
		}
	}
	if n := in.Calls("Auth/Authenticate") - logins; n > 2 {
		t.Errorf("%d logins while the keys were deleted, want at most 2", n)
	}
}

// A watch stream that hangs while keepalives go on (they have a stream of
// their own) is found out by its unanswered probe within two thirds of the
// TTL, and the read before the next stream reports the deletion it hid,
// also when every new stream hangs as well.
func TestKeyWatchHungStream(t *testing.T) {
	t.Parallel()
	fcli, in := faulty(t, 26)
	c := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	admin := newLocker(t, etcdClient(t))
	l := mustLock(t, c, "hung")
	poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
	in.HangStreams(reqfault.Method("Watch/Watch"))
	defer in.HangStreams(nil)
	start := time.Now()
	if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
		t.Fatal(err)
	}
	took := waitClosed(t, l.Done(), 4*time.Second, "Done after Break on a hung stream").Sub(start)
	if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
	t.Logf("deletion hidden by a hung stream reported after %v (TTL 3s: probes every 1s)", took.Round(time.Millisecond))
}

// rangeOf matches a plain read (not a transaction) of key.
func rangeOf(key string) reqfault.Match {
	return func(method string, req any) bool {
		r, ok := req.(*pb.RangeRequest)
		return ok && string(r.Key) == key
	}
}

// The read of its key that follows a compacted watch (recheck) loses its
// reply or arrives twice: the lock is not taken for lost, keeps its watch,
// and still learns of a later deletion.
func TestKeyWatchRecheckReadFault(t *testing.T) {
	for _, k := range []reqfault.Kind{reqfault.LostReply, reqfault.Twice} {
		t.Run(k.String(), func(t *testing.T) {
			fcli, in := faulty(t, 27)
			raw := etcdClient(t)
			c := newLocker(t, fcli)
			admin := newLocker(t, raw)
			l := mustLock(t, c, "recheck-"+k.String())
			poll.Until(t, "the watch", func() bool { n, ok := etcdlock.KeyWatchesForTest(c); return n == 1 && ok })
			var rev int64
			for range 3 { // so that the compaction covers the watch's start
				resp, err := raw.Put(t.Context(), "unrelated/recheck-"+k.String(), "x")
				if err != nil {
					t.Fatal(err)
				}
				rev = resp.Header.Revision
			}
			if _, err := raw.Compact(t.Context(), rev); err != nil {
				t.Fatal(err)
			}
			in.Next(reads(l.Key()), reqfault.LostReply) // the refresh fails: the new stream finds the watch compacted
			in.Next(rangeOf(l.Key()), k)
			etcdlock.EndKeyWatchStreamForTest(c)
			want := map[reqfault.Kind]int{reqfault.LostReply: 1}
			want[k]++
			poll.Until(t, "both faults injected", func() bool {
				got := in.Counts()
				return got[k] >= want[k] && got[reqfault.LostReply] >= want[reqfault.LostReply]
			})
			poll.Until(t, "the watch again", func() bool { n, ok := etcdlock.KeyWatchesForTest(c); return n == 1 && ok })
			if err := l.Err(); err != nil {
				t.Fatalf("Err after the faulty recheck: %v", err)
			}
			if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, l.Done(), 5*time.Second, "Done after Break")
			if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
				t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
			}
		})
	}
}
