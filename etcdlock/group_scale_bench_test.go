//go:build scale

package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// BenchmarkGroupFleet: 1,024 partitions over 16 workers (and 256 over 16,
// 1,024 over 8, to tell what memory grows with), as a Group and
// as one lock per partition taken by hand (each worker polls the members
// every second, computes the same share, releases what is no longer its
// own and TryLocks the rest), side by side on the same etcd member (a
// process of its own, under FENCELOCK_ETCD_DIR). Each iteration: 16
// workers join and settle; 5 s of steady state; a 17th joins; one of the
// first 16 is cut off from etcd and its partitions are taken over (the
// same with 8). It
// reports, per side:
//
//	settle-s        the first 16 settling
//	steady-req/s    unary requests per second in steady state (all workers;
//	                the keepalive and watch streams opened are not counted)
//	keepalive/s     keepalives per second in steady state (all workers)
//	watch-msg/s     messages sent on watch streams in steady state: the
//	                watcher's probes of its stream (see Client.Lock)
//	join-s          a 17th worker joining until the share settles
//	join-req        unary requests sent while it settles
//	moved           partitions that changed owner on the join
//	takeover-s      a worker cut off until its partitions are owned again
//	                and the share settles (TTL 2 s)
//	heap-KB/worker  the workers' heap after settling, over the workers
//
// go test -tags scale -run NONE -bench GroupFleet -benchtime 1x -count 3 ./etcdlock
func BenchmarkGroupFleet(b *testing.B) {
	ep := scaleMember(b)
	for _, size := range []struct{ n, m int }{{1024, 16}, {256, 16}, {1024, 8}} {
		for _, side := range []string{"group", "by-hand"} {
			b.Run(fmt.Sprintf("%s/partitions=%d/workers=%d", side, size.n, size.m), func(b *testing.B) {
				for range b.N {
					runFleet(b, ep, side, size.n, size.m)
				}
			})
		}
	}
}

const (
	fleetTTL  = 2 * time.Second
	fleetPoll = time.Second // the by-hand workers' interval
)

func runFleet(b *testing.B, ep, side string, n, m int) {
	b.StopTimer()
	f := newFleet(b, ep, side, fmt.Sprintf("/fleet-%s-%d/", side, time.Now().UnixNano()), n, fleetTTL)
	defer f.close()
	body := joinFleet
	if side != "group" {
		body = byHand
	}
	in := f.in
	ms := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	heap0 := ms()
	t0 := time.Now()
	for range m {
		f.start(body)
	}
	before := f.settled(m, 0, 60*time.Second)
	settle := time.Since(t0)
	heap := ms() - heap0

	calls0, ka0, watch0 := in.Calls(""), in.Sent("LeaseKeepAlive"), in.Sent("Watch")
	streams0 := in.Calls("LeaseKeepAlive") + in.Calls("Watch")
	methods := []string{"Range", "Txn", "LeaseGrant", "LeaseKeepAlive", "Watch", "LeaseTimeToLive"}
	was := map[string][2]int{}
	for _, m := range methods {
		was[m] = [2]int{in.Calls(m), in.Sent(m)}
	}
	time.Sleep(5 * time.Second)
	streams := func() int { return in.Calls("LeaseKeepAlive") + in.Calls("Watch") }
	steadyReq := float64(in.Calls("")-streams()-calls0+streams0) / 5
	steadyWatch := float64(in.Sent("Watch")-watch0) / 5
	if os.Getenv("FLEET_DEBUG") != "" {
		for _, m := range methods {
			b.Logf("steady 5 s, %s: calls %d, stream messages %d", m, in.Calls(m)-was[m][0], in.Sent(m)-was[m][1])
		}
	}
	steadyKA := float64(in.Sent("LeaseKeepAlive")-ka0) / 5

	calls0, t0 = in.Calls(""), time.Now()
	f.start(body)
	after := f.settled(m+1, 0, 60*time.Second)
	join := time.Since(t0)
	joinReq := in.Calls("") - calls0
	moved := 0
	for k := range before {
		if before[k] != after[k] {
			moved++
		}
	}

	victim := f.workers[0]
	t0 = time.Now()
	victim.proxy.Cut()
	f.settled(m, victim.lease, 60*time.Second)
	takeover := time.Since(t0)

	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(steadyReq, "steady-req/s")
	b.ReportMetric(steadyKA, "keepalive/s")
	b.ReportMetric(steadyWatch, "watch-msg/s")
	b.ReportMetric(join.Seconds(), "join-s")
	b.ReportMetric(float64(joinReq), "join-req")
	b.ReportMetric(float64(moved), "moved")
	b.ReportMetric(takeover.Seconds(), "takeover-s")
	b.ReportMetric(float64(heap)/1024/float64(m), "heap-KB/worker")
}

// byHand is a worker of the by-hand side: a member key (a reader of
// "members", which every worker holds at once), and every fleetPoll a read
// of the members, the share they make (the group's own), a release of the
// partitions no longer its own and a TryLock of each of its own it lacks.
func byHand(ctx context.Context, f *fleet, c *etcdlock.Client, cli *clientv3.Client, ready chan<- clientv3.LeaseID) {
	p, n := f.p, f.n
	me, err := c.RLock(ctx, "members")
	if err != nil {
		return
	}
	held := map[int]*etcdlock.Lock{}
	defer func() {
		for _, l := range held {
			l.Unlock(context.Background())
		}
		me.Unlock(context.Background())
	}()
	tick := time.NewTicker(fleetPoll)
	defer tick.Stop()
	for {
		resp, err := cli.Get(ctx, p+"lock/members/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err == nil {
			var names []string
			for _, kv := range resp.Kvs {
				names = append(names, string(kv.Key))
			}
			owners, members := etcdlock.AssignForTest(names, n)
			mine := slices.Index(members, me.Key())
			for k, l := range held {
				if owners[k] != mine || l.Err() != nil {
					l.Unlock(ctx)
					delete(held, k)
				}
			}
			for k, o := range owners {
				if o == mine && held[k] == nil {
					if l, err := c.TryLock(ctx, "p-"+strconv.Itoa(k)); err == nil {
						held[k] = l
						select {
						case ready <- l.Lease():
						default:
						}
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// settled waits until every partition is owned, by none on lease gone
// (0: any), and m leases own ⌊n/m⌋ or ⌈n/m⌉ each; it returns the owners.
func (f *fleet) settled(m int, gone clientv3.LeaseID, within time.Duration) []clientv3.LeaseID {
	f.tb.Helper()
	deadline := time.Now().Add(within)
	for {
		owners := f.owners()
		if fleetBalanced(owners, m, gone) {
			return owners
		}
		if time.Now().After(deadline) {
			f.tb.Fatalf("%s: not settled with %d workers in %v", f.side, m, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fleetBalanced reports whether every partition has an owner, none is
// gone, and m owners own ⌊n/m⌋ or ⌈n/m⌉ each.
func fleetBalanced(owners []clientv3.LeaseID, m int, gone clientv3.LeaseID) bool {
	n := len(owners)
	count := map[clientv3.LeaseID]int{}
	for _, o := range owners {
		if o == 0 || o == gone {
			return false
		}
		count[o]++
	}
	if len(count) != m {
		return false
	}
	for _, c := range count {
		if c < n/m || c > (n+m-1)/m {
			return false
		}
	}
	return true
}
