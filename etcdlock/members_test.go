package etcdlock_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

// members starts a cluster of three member processes for t (this test
// binary re-executed: TestMain calls embedetcd.MaybeRunMember first).
func members(t *testing.T) *etcdlocktest.Server {
	t.Helper()
	return etcdlocktest.New(t, etcdlocktest.WithMembers(3))
}

// leaderOf returns the index of the member that leads, once every running
// member follows it (so that a write sent to any of them reaches it),
// waiting up to 10 s.
func leaderOf(t *testing.T, srv *etcdlocktest.Server) int {
	t.Helper()
	cli := etcdClient(t, srv.Endpoints()...)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if i := agreedLeader(ctx, cli, srv.Endpoints()); i >= 0 {
			return i
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader that every running member follows within 10s")
	return -1
}

// agreedLeader returns the index of the leader that every member answering
// at eps follows, or -1.
func agreedLeader(ctx context.Context, cli *clientv3.Client, eps []string) int {
	leader, ids := uint64(0), map[uint64]int{}
	for i, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		resp, err := cli.Status(sctx, ep)
		cancel()
		switch {
		case err != nil:
			continue // stopped
		case resp.Leader == 0 || leader != 0 && resp.Leader != leader:
			return -1
		}
		leader, ids[resp.Header.MemberId] = resp.Leader, i
	}
	if i, ok := ids[leader]; ok {
		return i
	}
	return -1
}

// restart starts member i again and waits until it serves.
func restart(t *testing.T, srv *etcdlocktest.Server, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := srv.RestartMember(ctx, i); err != nil {
		t.Fatalf("RestartMember(%d): %v", i, err)
	}
}

// pinned is an etcdlock Client (TTL failoverTTL) on a clientv3 client that
// knows member's endpoint alone, so every stream it opens goes there, until
// widen gives it all the members' endpoints: streams already open stay on
// member, and later ones go to any member.
type pinned struct {
	member int
	locks  *etcdlock.Client
	widen  func()
}

func pin(t *testing.T, srv *etcdlocktest.Server, member int) pinned {
	t.Helper()
	eps := srv.Endpoints()
	cli := etcdClient(t, eps[member])
	return pinned{
		member: member,
		locks:  newLocker(t, cli, etcdlock.WithTTL(failoverTTL)),
		widen:  func() { cli.SetEndpoints(eps...) },
	}
}

// awaitRenewal waits until etcd has acknowledged a keepalive of l sent at
// or after since (ValidUntil reaches since plus the TTL), and returns how
// long after since that was seen. It fails the test if l is lost first.
func awaitRenewal(t *testing.T, l *etcdlock.Lock, since time.Time) time.Duration {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for l.ValidUntil().Before(since.Add(l.TTL())) {
		select {
		case <-l.Done():
			t.Fatalf("lock %q: lost (%v) before a keepalive was acknowledged", l.Name(), l.Err())
		case <-tick.C:
		}
	}
	return time.Since(since)
}

// assertHeld fails the test unless l is held.
func assertHeld(t *testing.T, l *etcdlock.Lock) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("lock %q: got lost (%v), want held", l.Name(), l.Err())
	default:
	}
}

// awaitWatchers waits up to 10 s until member i (i < 0: the running members
// together) has n watchers, all synced, as its metrics tell. A read of
// member i's metrics that fails (a busy machine: it times out after 1 s) is
// tried again until the deadline.
func awaitWatchers(t *testing.T, srv *etcdlocktest.Server, i, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all, unsynced := 0, 0
		var failed error
		for j, ep := range srv.Endpoints() {
			if i >= 0 && j != i {
				continue
			}
			a, u, err := watchers(t.Context(), ep)
			if err != nil && i >= 0 {
				failed = err
			}
			all, unsynced = all+a, unsynced+u
		}
		if failed == nil && all == n && unsynced == 0 {
			return
		}
		if time.Now().After(deadline) {
			if failed != nil {
				t.Fatalf("member %d: %v", i, failed)
			}
			t.Fatalf("member %d: got %d watchers (%d unsynced) after 10s, want %d synced", i, all, unsynced, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metrics reads members' metrics, keeping no connection open for goleak.
var metrics = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}

// watchers reads the watcher gauges of the member at endpoint ep: all its
// watchers, and the unsynced ones, which etcd catches up only every 100 ms.
func watchers(ctx context.Context, ep string) (all, unsynced int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := metrics.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), " ")
		switch name {
		case "etcd_debugging_mvcc_watcher_total":
			all, err = gauge(v)
		case "etcd_debugging_mvcc_slow_watcher_total":
			unsynced, err = gauge(v)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return all, unsynced, sc.Err()
}

func gauge(v string) (int, error) {
	f, err := strconv.ParseFloat(v, 64)
	return int(f), err
}
