//go:build scale

package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
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
	fleetPoll = time.Second // the by-hand workers'
)

// fleetWorker is one worker: its own proxy (to cut it off) and clients.
type fleetWorker struct {
	proxy *netproxy.Proxy
	c     *etcdlock.Client
	lease clientv3.LeaseID
	stop  func()
}

func runFleet(b *testing.B, ep, side string, n, m int) {
	b.StopTimer()
	in := reqfault.New(1) // counts every worker's requests; injects nothing
	defer in.Close()
	p := fmt.Sprintf("/fleet-%s-%d/", side, time.Now().UnixNano())
	direct, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	var workers []*fleetWorker
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	start := func() *fleetWorker {
		px, err := netproxy.Start(strings.TrimPrefix(ep, "http://"))
		if err != nil {
			b.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + px.Addr()}, DialTimeout: 5 * time.Second,
			Logger: zap.NewNop(), DialOptions: in.DialOptions()})
		if err != nil {
			b.Fatal(err)
		}
		c, err := etcdlock.New(cli, etcdlock.WithPrefix(p), etcdlock.WithTTL(fleetTTL), etcdlock.WithOwner(strconv.Itoa(len(workers))))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		w := &fleetWorker{proxy: px, c: c}
		w.stop = func() {
			cancel()
			px.Heal()
			wg.Wait()
			c.Close(context.Background())
			cli.Close()
			px.Close()
		}
		ready := make(chan clientv3.LeaseID, 1)
		if side == "group" {
			g, err := c.Group("fleet", n)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				g.Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error {
					select {
					case ready <- p.Lease():
					default:
					}
					<-ctx.Done()
					return nil
				})
			})
		} else {
			wg.Go(func() { byHand(ctx, c, cli, p, n, ready) })
		}
		select {
		case w.lease = <-ready:
		case <-time.After(30 * time.Second):
			b.Fatal("a worker took no partition in 30 s")
		}
		workers = append(workers, w)
		return w
	}
	ms := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	heap0 := ms()
	t0 := time.Now()
	for range m {
		start()
	}
	before := fleetSettled(b, direct, p, side, n, m, 60*time.Second)
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
	start()
	after := fleetSettled(b, direct, p, side, n, m+1, 60*time.Second)
	join := time.Since(t0)
	joinReq := in.Calls("") - calls0
	moved := 0
	for k := range before {
		if before[k] != after[k] {
			moved++
		}
	}

	victim := workers[0]
	t0 = time.Now()
	victim.proxy.Cut()
	fleetSettledWithout(b, direct, p, side, n, m, victim.lease, 60*time.Second)
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
func byHand(ctx context.Context, c *etcdlock.Client, cli *clientv3.Client, p string, n int, ready chan<- clientv3.LeaseID) {
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

// fleetOwners reads each partition's owner's lease (0: none).
func fleetOwners(tb testing.TB, direct *clientv3.Client, p, side string, n int) []clientv3.LeaseID {
	q := p + "group/fleet/p/"
	if side != "group" {
		q = p + "lock/p-"
	}
	resp, err := direct.Get(context.Background(), q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		tb.Fatal(err)
	}
	owners := make([]clientv3.LeaseID, n)
	for _, kv := range resp.Kvs {
		num, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), q), "/")
		k, err := strconv.Atoi(num)
		if err == nil && k < n && owners[k] == 0 {
			owners[k] = clientv3.LeaseID(kv.Lease)
		}
	}
	return owners
}

// fleetSettled waits until every partition is owned and m leases own
// ⌊n/m⌋ or ⌈n/m⌉ each, and returns the owners.
func fleetSettled(tb testing.TB, direct *clientv3.Client, p, side string, n, m int, within time.Duration) []clientv3.LeaseID {
	return fleetSettledWithout(tb, direct, p, side, n, m, 0, within)
}

// fleetSettledWithout is fleetSettled, with no partition owned by lease
// gone.
func fleetSettledWithout(tb testing.TB, direct *clientv3.Client, p, side string, n, m int, gone clientv3.LeaseID, within time.Duration) []clientv3.LeaseID {
	deadline := time.Now().Add(within)
	for {
		owners := fleetOwners(tb, direct, p, side, n)
		count := map[clientv3.LeaseID]int{}
		ok := true
		for _, o := range owners {
			ok = ok && o != 0 && o != gone
			count[o]++
		}
		if ok && len(count) == m {
			for _, c := range count {
				ok = ok && c >= n/m && c <= (n+m-1)/m
			}
		}
		if ok && len(count) == m {
			return owners
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not settled with %d workers in %v: %d owners", side, m, within, len(count))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
