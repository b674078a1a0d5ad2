package etcdlock_test

// A fleet of workers of one group on one etcd member: the machinery of
// TestGroupFleetSettles and of BenchmarkGroupFleet (group_scale_bench_test.go,
// which also runs the same fleet written by hand).

import (
	"context"
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
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestGroupFleetSettles holds the group to its goal at scale: 1,024
// partitions over 16 workers settle within fleetGoal of a 17th worker's
// join, and of one worker's leave (its Join's context ending, from then).
// Settled is the group's own word for it (Inspect: every partition owned
// by the member the share gives it, each member owning ⌊N/M⌋ or ⌈N/M⌉),
// polled every 10 ms: stricter than BenchmarkGroupFleet's, which reads
// the keys alone. Each work returns as soon as its partition moves.
func TestGroupFleetSettles(t *testing.T) {
	testenv.Long(t, "1,024 partitions over 16 workers")
	const n, m = 1024, 16
	f := newFleet(t, endpoints()[0], "group", prefix(t), n, fleetTestTTL)
	t.Cleanup(f.close)
	g := group(t, newLocker(t, etcdClient(t)), "fleet", n)
	t0 := time.Now()
	for range m {
		f.launch(joinFleet)
	}
	for _, w := range f.workers {
		f.owning(w)
	}
	t.Logf("%d workers joined at once and settled in %v", m, f.settledGroup(g, m, t0))

	t0 = time.Now()
	f.start(joinFleet)
	join := f.settledGroup(g, m+1, t0)
	leaver := f.workers[0]
	t0 = time.Now()
	stopped := make(chan time.Duration, 1)
	go func() { leaver.stop(); stopped <- time.Since(t0) }()
	left := f.settledGroup(g, m, t0)
	t.Logf("settled %v after a join, %v after a leave (its Join returned and Client closed after %v); goal %v",
		join, left, <-stopped, fleetGoal)
	for _, c := range []struct {
		what string
		took time.Duration
	}{{"a join", join}, {"a leave", left}} {
		if c.took > fleetGoal {
			t.Errorf("settled %v after %s, want at most %v", c.took, c.what, fleetGoal)
		}
	}
}

// fleetTestTTL is the TTL of TestGroupFleetSettles's workers: long, so
// that a session starved of CPU on a loaded machine is not lost (its
// worker would leave and join again) while the join and the leave
// measured depend on no TTL (each work returns at once).
const fleetTestTTL = 10 * time.Second

// fleetGoal is how soon a group of 1,024 partitions over 16 workers
// settles after a join or a leave.
const fleetGoal = 2 * time.Second

// settledGroup polls g until it has settled with m members (the
// group's own word for it: every partition owned by the member the share
// gives it, each member owning ⌊N/M⌋ or ⌈N/M⌉), and returns how long
// after from that was; it fails the test after three minutes.
func (f *fleet) settledGroup(g *etcdlock.Group, m int, from time.Time) time.Duration {
	f.tb.Helper()
	for {
		st, err := g.Inspect(context.Background())
		took := time.Since(from)
		if err == nil && balanced(st, m) {
			return took
		}
		if took > 3*time.Minute { // 16 joining at once took 50 s under -race at load 14
			f.tb.Fatalf("not settled with %d workers after %v: %v; %d members, %d moves", m, took, err, len(st.Members), st.Moves)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fleet is the workers of one group of n partitions (or, side "by-hand",
// of the bench's lock per partition) under prefix p of the etcd member at
// ep, each with its own proxy and clients. Its fields are set once before
// use, but workers, which only the test's goroutine touches.
type fleet struct {
	tb     testing.TB
	ep, p  string
	side   string
	n      int
	ttl    time.Duration      // the workers'
	in     *reqfault.Injector // counts every worker's requests; injects nothing
	direct *clientv3.Client

	workers []*fleetWorker // in the order started; the test's goroutine's
}

// fleetBody is what a worker runs until ctx ends, on its Client c and its
// etcd client cli; it sends the lease of its first partition on ready.
type fleetBody func(ctx context.Context, f *fleet, c *etcdlock.Client, cli *clientv3.Client, ready chan<- clientv3.LeaseID)

// fleetWorker is one worker: its own proxy (to cut it off) and clients.
type fleetWorker struct {
	proxy *netproxy.Proxy
	c     *etcdlock.Client
	ready chan clientv3.LeaseID // its first partition's lease, sent once
	lease clientv3.LeaseID      // set by owning
	stop  func()                // leaves, and closes its clients and proxy
}

// newFleet returns an empty fleet; close stops its workers.
func newFleet(tb testing.TB, ep, side, p string, n int, ttl time.Duration) *fleet {
	tb.Helper()
	direct, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	return &fleet{tb: tb, ep: ep, p: p, side: side, n: n, ttl: ttl, in: reqfault.New(1), direct: direct}
}

// close stops every worker, then closes the fleet's clients.
func (f *fleet) close() {
	for _, w := range f.workers {
		w.stop()
	}
	f.direct.Close()
	f.in.Close()
}

// start starts a worker running body, and returns once it owns a
// partition.
func (f *fleet) start(body fleetBody) *fleetWorker {
	f.tb.Helper()
	w := f.launch(body)
	f.owning(w)
	return w
}

// launch starts a worker running body, and returns at once.
func (f *fleet) launch(body fleetBody) *fleetWorker {
	f.tb.Helper()
	px, err := netproxy.Start(strings.TrimPrefix(f.ep, "http://"))
	if err != nil {
		f.tb.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + px.Addr()}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: f.in.DialOptions()})
	if err != nil {
		f.tb.Fatal(err)
	}
	c, err := etcdlock.New(cli, etcdlock.WithPrefix(f.p), etcdlock.WithTTL(f.ttl), etcdlock.WithOwner(strconv.Itoa(len(f.workers))))
	if err != nil {
		f.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	w := &fleetWorker{proxy: px, c: c, ready: make(chan clientv3.LeaseID, 1)}
	w.stop = sync.OnceFunc(func() {
		cancel()
		px.Heal()
		wg.Wait()
		c.Close(context.Background())
		cli.Close()
		px.Close()
	})
	f.workers = append(f.workers, w)
	wg.Go(func() { body(ctx, f, c, cli, w.ready) })
	return w
}

// owning waits until w owns a partition, and sets w.lease.
func (f *fleet) owning(w *fleetWorker) {
	f.tb.Helper()
	select {
	case w.lease = <-w.ready:
	case <-time.After(2 * time.Minute):
		count := map[clientv3.LeaseID]int{}
		for _, o := range f.owners() {
			count[o]++
		}
		f.tb.Fatalf("a worker took no partition in 2 minutes; partitions per owner's lease: %v", count)
	}
}

// joinFleet is the body of a group's worker: it joins, and its works wait
// for their context.
func joinFleet(ctx context.Context, f *fleet, c *etcdlock.Client, _ *clientv3.Client, ready chan<- clientv3.LeaseID) {
	g, err := c.Group("fleet", f.n)
	if err != nil {
		f.tb.Error(err)
		return
	}
	g.Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error {
		select {
		case ready <- p.Lease():
		default:
		}
		<-ctx.Done()
		return nil
	})
}

// owners reads each partition's owner's lease (0: none).
func (f *fleet) owners() []clientv3.LeaseID {
	q := etcdlock.KeysUnder(f.p).GroupPartitions("fleet")
	if f.side != "group" {
		q = etcdlock.KeysUnder(f.p).Locks() + "p-" // the by-hand side's lock "p-K"
	}
	resp, err := f.direct.Get(context.Background(), q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		f.tb.Fatal(err)
	}
	owners := make([]clientv3.LeaseID, f.n)
	for _, kv := range resp.Kvs {
		num, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), q), "/")
		k, err := strconv.Atoi(num)
		if err == nil && k < f.n && owners[k] == 0 {
			owners[k] = clientv3.LeaseID(kv.Lease)
		}
	}
	return owners
}
