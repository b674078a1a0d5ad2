package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Tests of the follower (follow.go) that Observe, a group's members and
// WatchStatus share, through etcdlock.FollowForTest: a follower of the
// keys under a prefix that reports each of its steps.

// putValue writes key=value and returns the revision of the write.
func putValue(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(t.Context(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// stepUntil reads steps until one satisfies done and returns the steps
// read, that one last; it fails the test after d.
func stepUntil(t *testing.T, steps <-chan etcdlock.FollowStep, d time.Duration, what string, done func(etcdlock.FollowStep) bool) []etcdlock.FollowStep {
	t.Helper()
	timeout := time.After(d)
	var seen []etcdlock.FollowStep
	for {
		select {
		case s, ok := <-steps:
			if !ok {
				t.Fatalf("%s: the follower ended; steps: %+v", what, seen)
			}
			seen = append(seen, s)
			if done(s) {
				return seen
			}
		case <-timeout:
			t.Fatalf("%s: not within %v; steps: %+v", what, d, seen)
		}
	}
}

// value returns a step's state of key ("" when it has none).
func value(key, want string) func(etcdlock.FollowStep) bool {
	return func(s etcdlock.FollowStep) bool { return s.Keys != nil && s.Keys[key] == want }
}

// stopFollowing cancels the follower and waits for its goroutine to end.
func stopFollowing(t *testing.T, cancel context.CancelFunc, steps <-chan etcdlock.FollowStep) {
	t.Helper()
	cancel()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-steps:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the follower still runs 5s after its ctx ended")
		}
	}
}

// A watch from a revision compacted between the read and the watch (etcd
// ends it) ends the round; the next round reads afresh, and the changes of
// the gap come as its read's result, not one by one. Once that round's
// watch is in place the follower says it resumed, and follows again.
func TestFollowerCompactionMidFollow(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	p := prefix(t) + "f/"
	putValue(t, cli, p+"a", "1")
	between := func(round int, _ int64) {
		if round != 0 {
			return
		}
		// The first round's watch starts after its read: compact past it.
		// (On the follower's goroutine: t.Error, not t.Fatal.)
		_, err := cli.Put(t.Context(), p+"a", "2")
		var resp *clientv3.PutResponse
		if err == nil {
			resp, err = cli.Put(t.Context(), p+"a", "3")
		}
		if err == nil {
			_, err = cli.Compact(t.Context(), resp.Header.Revision)
		}
		if err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	steps := etcdlock.FollowForTest(ctx, c, p, p, between)
	if s := stepUntil(t, steps, 5*time.Second, "first read", func(etcdlock.FollowStep) bool { return true }); !s[0].Read || s[0].Keys[p+"a"] != "1" {
		t.Fatalf("first step %+v, want the read of a=1", s[0])
	}
	seen := stepUntil(t, steps, 5*time.Second, "a read after the compaction", func(s etcdlock.FollowStep) bool { return s.Read })
	if len(seen) != 2 || seen[0].Err == nil || seen[1].Keys[p+"a"] != "3" {
		t.Fatalf("after the compaction: steps %+v, want the round's end, then a read of a=3 (2 compacted away, never applied)", seen)
	}
	stepUntil(t, steps, 5*time.Second, "resumed", func(s etcdlock.FollowStep) bool { return s.Resumed })
	putValue(t, cli, p+"a", "4")
	seen = stepUntil(t, steps, 5*time.Second, "a=4 applied", value(p+"a", "4"))
	if s := seen[len(seen)-1]; s.Read {
		t.Fatalf("a=4 came by a read (%+v), want the watch's event", seen)
	}
	stopFollowing(t, cancel, steps)
}

// A watch stream that hangs (the connection works, the stream delivers
// nothing, and so does every new one) is found out by the watcher's probes
// (within two thirds of the TTL or so): the round ends and the next one
// reads the change the hung stream withheld. Once streams work again, a
// watch is in place and changes come as events again.
func TestFollowerHungStream(t *testing.T) {
	testenv.Long(t, "it waits out hung streams found by probes a second apart")
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 210)
	c := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	p := prefix(t) + "f/"
	putValue(t, direct, p+"a", "1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	steps := etcdlock.FollowForTest(ctx, c, p, p, nil)
	stepUntil(t, steps, 5*time.Second, "first read", value(p+"a", "1"))
	putValue(t, direct, p+"a", "2")
	if s := stepUntil(t, steps, 5*time.Second, "a=2 applied", value(p+"a", "2")); s[len(s)-1].Read {
		t.Fatalf("a=2 came by a read (%+v), want the watch's event", s)
	}

	in.HangStreams(reqfault.Method("Watch/Watch"))
	defer in.HangStreams(nil)
	putValue(t, direct, p+"a", "3")
	start := time.Now()
	seen := stepUntil(t, steps, 6*time.Second, "a=3 on a hung stream", value(p+"a", "3"))
	if s := seen[len(seen)-1]; !s.Read || len(seen) < 2 || seen[len(seen)-2].Err == nil {
		t.Fatalf("steps %+v, want the round's end, then a read of a=3", seen)
	}
	t.Logf("a change withheld by a hung stream read %v after it (TTL 3s; %d streams hung)", time.Since(start).Round(time.Millisecond), in.Hung())

	in.HangStreams(nil)
	stepUntil(t, steps, 10*time.Second, "resumed once streams work", func(s etcdlock.FollowStep) bool { return s.Resumed })
	putValue(t, direct, p+"a", "4")
	if s := stepUntil(t, steps, 5*time.Second, "a=4 applied", value(p+"a", "4")); s[len(s)-1].Read {
		t.Fatalf("a=4 came by a read (%+v), want the watch's event", s)
	}
	stopFollowing(t, cancel, steps)
}

// A watch refused for a missing permission while the read works (a role
// that may read less than the follower watches) ends each round with a
// *PermissionError, never counts as resumed, and is tried again slowly: a
// second apart once refused, not every 10 ms.
func TestFollowerWatchRefused(t *testing.T) {
	testenv.Long(t, "it counts 3.5 s of refused watches")
	t.Parallel()
	p := prefix(t)
	s := secureEtcd(t, time.Minute, false, p)
	c, err := etcdlock.New(s.locker(t, nil), etcdlock.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 3500*time.Millisecond)
	defer cancel()
	reads, refusals := 0, 0
	for st := range etcdlock.FollowForTest(ctx, c, p+"ok/", "/elsewhere/", nil) {
		var perm *etcdlock.PermissionError
		switch {
		case st.Read:
			reads++
		case st.Resumed:
			t.Fatal("the follower resumed, with every watch refused")
		case ctx.Err() == nil && !errors.As(st.Err, &perm):
			t.Fatalf("a round ended with %v, want a PermissionError", st.Err)
		case st.Err != nil:
			refusals++
		}
	}
	t.Logf("%d reads, %d refusals in 3.5s", reads, refusals)
	if reads < 2 || reads > 5 {
		t.Fatalf("%d reads in 3.5 s of refused watches, want 2 to 5 (one a second)", reads)
	}
}
