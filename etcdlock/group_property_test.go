package etcdlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// groupChurn is one run of the group property test.
type groupChurn struct {
	seed       uint64
	partitions int
	maxWorkers int
	budget     time.Duration // of churn
	faultRate  float64
	stopDelay  time.Duration // a work's time to stop once its context ends
	opts       []etcdlock.JoinOption
	control    bool // stop at the first violation
}

type churnStats struct {
	joins, leaves, revokes, pauses int
	faults                         int
	settle                         time.Duration
	violations                     []string
}

// churnWorker is one worker: its own proxy (to pause it), faulty client,
// etcdlock Client and Join.
type churnWorker struct {
	proxy *netproxy.Proxy
	in    *reqfault.Injector
	c     *etcdlock.Client
	stop  func() error
}

// TestGroupChurnProperty churns a group's workers (joins, leaves, revoked
// leases, workers paused past their TTL) under random request faults
// (late, lost replies, doubled), and checks: never two works of one
// partition running with both leases alive; each partition's tokens
// strictly increasing; every partition owned, and the share balanced
// within one, within a bound after the churn stops; no key left once
// every worker has left. Replay with -etcdlock.seed.
func TestGroupChurnProperty(t *testing.T) {
	testenv.Long(t, "a property test: group churn under request faults")
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run TestGroupChurnProperty ./etcdlock -etcdlock.seed %d)", seed, seed)
	cfg := groupChurn{seed: seed, partitions: 64, maxWorkers: 6, budget: 25 * time.Second, faultRate: 0.05, stopDelay: 20 * time.Millisecond}
	if *propSoak {
		cfg.budget = 5 * time.Minute
	}
	st := runGroupChurn(t, cfg)
	t.Logf("%d joins, %d leaves, %d revokes, %d pauses, %d request faults; settled %v after the churn",
		st.joins, st.leaves, st.revokes, st.pauses, st.faults, st.settle.Round(time.Millisecond))
	if len(st.violations) > 0 {
		t.Fatalf("%d violations (seed %d), first: %v", len(st.violations), seed, st.violations[:min(10, len(st.violations))])
	}
	if st.faults < 20 || st.joins < 5 || st.leaves < 3 {
		t.Fatalf("too little churn to prove anything: %+v", st)
	}
}

// TestGroupChurnPropertyControl is the control: a worker that releases a
// partition taken away before its work has returned (HandoffFirstForTest)
// must be caught with two works running under live leases.
func TestGroupChurnPropertyControl(t *testing.T) {
	testenv.Long(t, "a property test's control")
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run TestGroupChurnPropertyControl ./etcdlock -etcdlock.seed %d)", seed, seed)
	cfg := groupChurn{seed: seed, partitions: 64, maxWorkers: 6, budget: 20 * time.Second, faultRate: 0.03,
		stopDelay: 50 * time.Millisecond, opts: []etcdlock.JoinOption{etcdlock.HandoffFirstForTest()}, control: true}
	st := runGroupChurn(t, cfg)
	for _, v := range st.violations {
		if strings.Contains(v, "runs with its lease alive") {
			t.Logf("control found: %s", v)
			return
		}
	}
	t.Fatalf("control (seed %d): no overlapping owners found with the handoff not waiting for the work; the test proves nothing (%+v)", seed, st)
}

func runGroupChurn(t *testing.T, cfg groupChurn) churnStats {
	eps := propServer(t)
	direct := etcdClient(t, eps...)
	rng := rand.New(rand.NewPCG(cfg.seed, 7))
	runs := newGroupRuns()
	var st churnStats
	var mu sync.Mutex // guards workers, for the cleanup
	var workers []*churnWorker
	var injectors []*reqfault.Injector // every worker's, for the count
	seq := 0
	join := func() {
		seq++
		p, err := netproxy.Start(strings.TrimPrefix(eps[0], "http://"))
		if err != nil {
			t.Fatal(err)
		}
		cli, in := faulty(t, cfg.seed+uint64(seq), "http://"+p.Addr())
		in.Random(cfg.faultRate, 150*time.Millisecond, nil)
		c := newLocker(t, cli, etcdlock.WithTTL(propTTL), etcdlock.WithCleanupTimeout(propCleanup))
		w := &churnWorker{proxy: p, in: in, c: c}
		w.stop = joinGroup(t, group(t, c, "churn", cfg.partitions), runs.work(cfg.stopDelay), cfg.opts...)
		t.Cleanup(func() { p.Close() })
		mu.Lock()
		workers = append(workers, w)
		injectors = append(injectors, in)
		mu.Unlock()
		st.joins++
	}
	pick := func() *churnWorker {
		i := rng.IntN(len(workers))
		w := workers[i]
		workers = append(workers[:i], workers[i+1:]...)
		return w
	}
	for range 3 {
		join()
	}
	ctx, cancel := context.WithTimeout(t.Context(), cfg.budget)
	defer cancel()
	for ctx.Err() == nil {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if cfg.control && len(runs.check()) > 0 {
			break
		}
		mu.Lock()
		n := len(workers)
		mu.Unlock()
		switch a := rng.IntN(10); {
		case a < 4 && n < cfg.maxWorkers || n < 2:
			join()
		case a < 7:
			mu.Lock()
			w := pick()
			mu.Unlock()
			go w.stop() // leaves: its works end, then its partitions go
			st.leaves++
		case a < 8:
			mu.Lock()
			w := workers[rng.IntN(len(workers))]
			mu.Unlock()
			if lease := sessionLease(w.c); lease != 0 {
				runs.revoke(lease)
				direct.Revoke(context.Background(), lease) // as expiry would; it joins again
				st.revokes++
			}
		default:
			mu.Lock()
			w := pick() // a worker paused past its TTL: cut off, then gone for good
			mu.Unlock()
			w.proxy.Cut()
			go func() {
				time.Sleep(propTTL + 500*time.Millisecond)
				w.proxy.Heal()
				w.stop()
			}()
			st.pauses++
		}
	}
	mu.Lock()
	alive := workers
	mu.Unlock()
	for _, w := range alive {
		w.in.Heal()
	}
	mu.Lock()
	for _, in := range injectors {
		st.faults += totalFaults(in.Counts())
	}
	mu.Unlock()
	g := group(t, newLocker(t, direct), "churn", cfg.partitions)
	start := time.Now()
	if !cfg.control {
		groupSettled(t, g, len(alive), 3*propTTL+5*time.Second)
		st.settle = time.Since(start)
	}
	for _, w := range alive {
		w.stop()
	}
	st.violations = runs.check()
	if !cfg.control {
		deadline := time.Now().Add(2 * propTTL)
		for len(keys(t, direct, prefix(t)+"group/")) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // paused workers' keys go with their leases
		}
		if ks := keys(t, direct, prefix(t)+"group/"); len(ks) > 0 {
			st.violations = append(st.violations, fmt.Sprintf("keys left after every worker left: %v", ks))
		}
	}
	return st
}

func totalFaults(m map[reqfault.Kind]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// sessionLease is the lease of c's current session, 0 when it has none
// or cannot tell at once.
func sessionLease(c *etcdlock.Client) clientv3.LeaseID {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	l, err := c.TryLock(ctx, "lease-of")
	if err != nil {
		return 0
	}
	defer l.Unlock(context.Background())
	return l.Lease()
}
