package etcdlock_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// WatchStatus's first status is what the Inspect calls read, but for the
// TTLs (granted, not left): for names, for a prefix of names, and for
// every name.
func TestWatchStatusMatchesInspect(t *testing.T) {
	t.Parallel()
	a, b := newLocker(t, etcdClient(t)), newLocker(t, etcdClient(t))
	watcher := newLocker(t, etcdClient(t))
	defer mustLock(t, a, "jobs/a").Unlock(context.Background())
	var waiter sync.WaitGroup
	waiter.Go(func() { _, _ = b.Lock(t.Context(), "jobs/a") }) // waits until the test ends
	t.Cleanup(waiter.Wait)                                     // t.Context ends first
	poll.Until(t, "b waiting", func() bool {
		q, err := watcher.Inspect(t.Context(), "jobs/a")
		return err == nil && len(q.Waiters) == 1
	})
	defer mustCampaign(t, a, "jobs/lead", "v").Resign(context.Background())
	sem, err := a.Semaphore("pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	permit, err := sem.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer permit.Unlock(context.Background())
	defer joinGroup(t, group(t, b, "orders", 2), newGroupRuns().work(0))()
	groupSettled(t, group(t, watcher, "orders", 2), 1, 10*time.Second)

	inspected := func(locks, elections, sems, groups []string) etcdlock.Status {
		var st etcdlock.Status
		for _, name := range locks {
			st.Locks = append(st.Locks, inspect(t, watcher.Inspect, name))
		}
		for _, name := range elections {
			st.Elections = append(st.Elections, inspect(t, watcher.InspectElection, name))
		}
		for _, name := range sems {
			st.Semaphores = append(st.Semaphores, inspect(t, watcher.InspectSemaphore, name))
		}
		for _, name := range groups {
			st.Groups = append(st.Groups, inspect(t, watcher.InspectGroup, name))
		}
		return st
	}
	one := []string{"jobs/a"}
	tests := []struct {
		name  string
		scope etcdlock.StatusScope
		want  etcdlock.Status
	}{
		{"name", etcdlock.StatusScope{Names: one}, inspected(one, one, one, one)},
		{"prefix", etcdlock.StatusScope{Names: []string{"jobs/", "jobs/l"}, Prefix: true}, inspected(one, []string{"jobs/lead"}, nil, nil)},
		{"all", etcdlock.StatusScope{}, inspected(one, []string{"jobs/lead"}, []string{"pool"}, []string{"orders"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ch, err := watcher.WatchStatus(ctx, tt.scope)
			if err != nil {
				t.Fatal(err)
			}
			got := next(t, ch)
			for _, e := range entries(&got) {
				if e.TTL != time.Second {
					t.Errorf("%s: TTL %v, want the lease's granted TTL, 1s", e.Key, e.TTL)
				}
			}
			checkStatus(t, watcher, tt.scope, got)
			normalize(&got)
			normalize(&tt.want)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v, as Inspect reads it", got, tt.want)
			}
		})
	}
}

// A WatchStatus cut off from etcd, while the lock changes hands and the
// history is compacted, says so, then reads afresh and goes on. On a server
// of its own: it runs beside other tests, and a compaction of the shared
// member would end their watches (see TestParallelTestsCompactNoSharedMember).
func TestWatchStatusResumesAfterCutAndCompaction(t *testing.T) {
	t.Parallel()
	ep := embedetcd.NewServer(t).Endpoints()[0]
	cli := etcdClient(t, ep)
	pcli, proxy := proxiedTo(t, ep)
	watcher, a, b := newLocker(t, pcli), newLocker(t, cli), newLocker(t, etcdClient(t, ep))
	first := mustLock(t, a, "x")
	ch, err := watcher.WatchStatus(t.Context(), etcdlock.StatusScope{Names: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	holder := func(st etcdlock.Status) int64 {
		if st.Locks[0].Holder == nil {
			return 0
		}
		return int64(st.Locks[0].Holder.Token)
	}
	if st := next(t, ch); st.Err != nil || holder(st) != int64(first.Token()) {
		t.Fatalf("first status: holder %d, err %v; want %d, nil", holder(st), st.Err, first.Token())
	}
	proxy.Cut()
	proxy.Reset()
	if st := next(t, ch); st.Err == nil || holder(st) != int64(first.Token()) {
		t.Fatalf("status after the cut: holder %d, err %v; want the last known, %d, and an error", holder(st), st.Err, first.Token())
	}
	first.Unlock(t.Context())
	last := mustLock(t, b, "x")
	defer last.Unlock(context.Background())
	resp, err := cli.Get(t.Context(), "compact")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	st := next(t, ch)
	for st.Err != nil { // reads that failed before the heal
		st = next(t, ch)
	}
	if holder(st) != int64(last.Token()) {
		t.Fatalf("status after the cut healed: holder %d, want %d", holder(st), last.Token())
	}
}

// next receives the next status from ch, failing the test if none comes
// within 10 s.
func next(t *testing.T, ch <-chan etcdlock.Status) etcdlock.Status {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("WatchStatus's channel closed")
		}
		return st
	case <-time.After(20 * time.Second): // a stream's open given up takes 5 s
		t.Fatal("no status from WatchStatus within 20s")
		return etcdlock.Status{}
	}
}

// inspect reads name with an Inspect call, failing the test on an error.
func inspect[T any](t *testing.T, call func(context.Context, string) (T, error), name string) T {
	t.Helper()
	v, err := call(t.Context(), name)
	if err != nil {
		t.Fatalf("inspecting %q: %v", name, err)
	}
	return v
}

// entries returns every entry of st.
func entries(st *etcdlock.Status) []*etcdlock.Entry {
	var es []*etcdlock.Entry
	queue := func(q *etcdlock.Queue) {
		for i := range q.Holders {
			es = append(es, &q.Holders[i])
		}
		for i := range q.Waiters {
			es = append(es, &q.Waiters[i])
		}
	}
	for i := range st.Locks {
		queue(&st.Locks[i])
	}
	for i := range st.Elections {
		queue(&st.Elections[i])
	}
	for i := range st.Semaphores {
		queue(&st.Semaphores[i].Queue)
	}
	for i := range st.Groups {
		g := &st.Groups[i]
		for _, list := range [][]etcdlock.Entry{g.Members, g.Others} {
			for j := range list {
				es = append(es, &list[j])
			}
		}
		for j := range g.Owners {
			if g.Owners[j].Owner != nil {
				es = append(es, g.Owners[j].Owner)
			}
			for k := range g.Owners[j].Waiters {
				es = append(es, &g.Owners[j].Waiters[k])
			}
		}
	}
	return es
}

// normalize zeroes what a read and a watch of the same keys may see
// differently: the revision read at, the TTLs; and the sections.
func normalize(st *etcdlock.Status) {
	st.Rev = 0
	st.Sections = nil // the typed fields hold the same values (sectionsMatchFields)
	for _, qs := range [][]etcdlock.Queue{st.Locks, st.Elections} {
		for i := range qs {
			qs[i].Rev = 0
		}
	}
	for i := range st.Semaphores {
		st.Semaphores[i].Rev = 0
	}
	for i := range st.Groups {
		st.Groups[i].Rev = 0
	}
	for _, e := range entries(st) {
		e.TTL = 0
	}
}
