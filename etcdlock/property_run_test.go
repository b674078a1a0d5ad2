package etcdlock_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// propDriver is what a row drives (property_test.go): the harness calls
// op from each of its goroutines until the run ends, then settle.
type propDriver interface {
	op(ctx context.Context, rng *rand.Rand, w int) bool // one random operation by goroutine w; whether it counts
	seen() []string                                     // the violations found so far (a control stops at the first it wants)
	settle() []string                                   // once the faults stopped: every violation of the run
}

// propEnv is one run's world: its own etcd member, its fault injectors,
// its owners, and the counts it reports.
type propEnv struct {
	t        *testing.T
	cfg      propRun
	seed     uint64
	reverted bool // a control's run: the row's protection reverted
	eps      []string
	direct   *clientv3.Client
	owners   []*etcdlock.Client // cfg.owners Clients on one faulty etcd client

	mu      sync.Mutex // guards ins, started, counts
	ins     []*reqfault.Injector
	started bool
	counts  map[string]int
}

// propStats is what a run did and found.
type propStats struct {
	seed       uint64
	counts     map[string]int // ops, faults, and what the driver counts
	violations []string
}

// runRow runs one row with the shape cfg: a seeded schedule of
// operations, under seeded faults, stopped at the first violation the
// control wants when reverted, then checked.
func runRow(t *testing.T, row propRow, cfg propRun, reverted bool) propStats {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run '^%s$' ./etcdlock -etcdlock.seed %d)", seed, strings.ReplaceAll(t.Name(), "/", "$/^"), seed)
	e := &propEnv{t: t, cfg: cfg, seed: seed, reverted: reverted, eps: propServer(t), counts: map[string]int{}}
	e.direct = etcdClient(t, e.eps...)
	opts := append([]etcdlock.Option{etcdlock.WithTTL(propTTL), etcdlock.WithCleanupTimeout(propCleanup)}, row.opts...)
	if reverted {
		opts = append(opts, row.revert...)
	}
	if cfg.owners > 0 {
		fcli := e.faulty(seed, e.eps...)
		for range cfg.owners {
			e.owners = append(e.owners, newLocker(t, fcli, opts...))
		}
	}
	d := row.driver(e)
	e.startFaults()
	ctx, cancel := context.WithTimeout(t.Context(), cfg.budget)
	defer cancel()
	if reverted {
		go func() {
			for ctx.Err() == nil && !hasWanted(d.seen(), row.want) {
				time.Sleep(100 * time.Millisecond)
			}
			cancel()
		}()
	}
	start := time.Now()
	e.add("ops", int(e.drive(ctx, d)))
	elapsed := time.Since(start)
	faults := e.healFaults()
	st := propStats{seed: seed, violations: d.settle()}
	e.mu.Lock()
	st.counts = e.counts
	e.mu.Unlock()
	t.Logf("%v, faults %v, in %v; %d violations", st.counts, faults, elapsed.Round(time.Millisecond), len(st.violations))
	return st
}

// drive runs the driver's operations from every goroutine, each with its
// own seeded random source, until ctx ends or cfg.ops counted.
func (e *propEnv) drive(ctx context.Context, d propDriver) int64 {
	var ops atomic.Int64
	var wg sync.WaitGroup
	for w := range max(e.cfg.owners, 1) * e.cfg.perOwner {
		rng := rand.New(rand.NewPCG(e.seed, uint64(w)))
		wg.Go(func() {
			for ctx.Err() == nil && (e.cfg.ops == 0 || ops.Load() < e.cfg.ops) {
				if d.op(ctx, rng, w) {
					ops.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ops.Load()
}

func hasWanted(vs []string, want []string) bool {
	for _, v := range vs {
		if wanted(v, want) {
			return true
		}
	}
	return false
}

// faulty returns an etcd client whose requests go through a fault
// injector seeded with seed, which gives the run's random faults once
// the run starts.
func (e *propEnv) faulty(seed uint64, eps ...string) *clientv3.Client {
	cli, in := faulty(e.t, seed, eps...)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ins = append(e.ins, in)
	if e.started {
		in.Random(e.cfg.faultRate, e.cfg.maxLate, e.cfg.faultOn, e.cfg.faultKinds...)
	}
	return cli
}

func (e *propEnv) startFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = true
	for _, in := range e.ins {
		in.Random(e.cfg.faultRate, e.cfg.maxLate, e.cfg.faultOn, e.cfg.faultKinds...)
	}
}

// healFaults stops every fault and returns how many of each kind were
// injected (also counted as "faults").
func (e *propEnv) healFaults() map[reqfault.Kind]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	all := map[reqfault.Kind]int{}
	for _, in := range e.ins {
		in.Heal()
		for k, n := range in.Counts() {
			all[k] += n
			e.counts["faults"] += n
		}
	}
	return all
}

// closeFaults waits for late deliveries: no request arrives after it.
func (e *propEnv) closeFaults() {
	e.mu.Lock()
	ins := e.ins
	e.mu.Unlock()
	for _, in := range ins {
		in.Close()
	}
}

func (e *propEnv) add(name string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[name] += n
}

func (e *propEnv) atLeast(name string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[name] = max(e.counts[name], n)
}

// propServer starts an etcd member of the test's own, with its data on
// tmpfs where there is one: the test checks the library's logic under
// request faults, and fsyncs on a shared disk would only slow it down.
func propServer(t *testing.T) []string {
	dir := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir = "/dev/shm"
	}
	d, err := os.MkdirTemp(dir, "etcdlock-prop-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := embedetcd.StartServer(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); os.RemoveAll(d) })
	return c.Endpoints()
}
