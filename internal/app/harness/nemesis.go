package harness

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// holdTimeout bounds the wait for an armed worker to reach a write.
const holdTimeout = 5 * time.Second

// nemesis injects faults, in loops of each kind ([faultKinds]).
type nemesis struct {
	cfg   *Config
	fleet *fleet
	etcd  *embedetcd.Cluster
	// members is held through each member crash and each replacement: one
	// member of three down at a time, so the cluster never loses quorum.
	members sync.Mutex
	hist    *history // the workers' writes so far
	start   time.Time
	counts  map[check.FaultKind]*atomic.Int64
	failed  atomic.Int64 // faults given up on (no worker reached a write in time)
}

func newNemesis(cfg *Config, f *fleet, etcd *embedetcd.Cluster, hist *history) *nemesis {
	n := &nemesis{cfg: cfg, fleet: f, etcd: etcd, hist: hist, start: time.Now(), counts: map[check.FaultKind]*atomic.Int64{}}
	for _, f := range faultKinds {
		n.counts[f.kind] = &atomic.Int64{}
	}
	return n
}

// run injects faults of every kind until each kind is done (see
// [nemesis.done]), then waits until the workers' writes reach cfg.Until, or
// until ctx ends.
func (n *nemesis) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, f := range faultKinds {
		for j := range f.loops {
			rng := rand.New(rand.NewPCG(uint64(n.cfg.Seed), uint64(100*j+i+1)))
			wg.Go(func() { n.loop(ctx, f, rng) })
		}
	}
	wg.Wait()
	for ctx.Err() == nil && len(n.cfg.Until.WriteShortfalls(n.hist.progress(), n.cfg.Fenced)) > 0 {
		sleep(ctx, 200*time.Millisecond)
	}
}

func (n *nemesis) loop(ctx context.Context, f faultKind, rng *rand.Rand) {
	for ctx.Err() == nil && !n.done(f) {
		if f.inject(n, ctx, rng) {
			if c := n.counts[f.kind].Add(1); c%5 == 0 {
				n.cfg.logf("nemesis: %d %s faults", c, f.kind)
			}
		} else {
			n.failed.Add(1)
		}
		sleep(ctx, between(rng, 100*time.Millisecond, 600*time.Millisecond))
	}
}

// done reports whether the loops of f's kind may stop: the kind has its
// minimum and MinDuration has passed. Stale writes need faults, so the
// kinds that make them (faultKind.stale: pauses, partitions) also go on
// while a fenced run has refused too few (Until.RefusedOverall), or a
// control run has not had one land on every resource kind its workload
// must catch one on (check.Workload's MustCatch; for the bank, money lost
// on PostgreSQL): without them the control proves nothing for that kind.
// (The fenced run's pauses go to kinds with no refusal yet too, but do
// not wait for one on each: that would double the run.) The other kinds
// stop at their minimums, and so do the write minimums: more kills,
// crashed or replaced members and request faults would only slow the
// writes down, and take the workers that pauses need.
func (n *nemesis) done(f faultKind) bool {
	if n.counts[f.kind].Load() < int64(n.cfg.Until.Faults[f.kind]) || time.Since(n.start) < n.cfg.MinDuration {
		return false
	}
	if f.kind == faultPause && n.cfg.UntilStalled && !n.stalled() {
		return false
	}
	if !f.stale {
		return true
	}
	if n.cfg.Fenced {
		return n.hist.progress().Refused >= n.cfg.Until.RefusedOverall
	}
	return len(n.hist.lacking(false)) == 0
}

// stalled reports whether the events so far show a stall past its bound.
func (n *nemesis) stalled() bool {
	return len(check.CheckLiveness(check.Stalls(n.hist.wl, n.hist.snapshot(), n.cfg.TTL))) > 0
}

// counted returns how many faults of each kind were injected.
func (n *nemesis) counted() map[check.FaultKind]int {
	m := map[check.FaultKind]int{}
	for k, c := range n.counts {
		m[k] = int(c.Load())
	}
	return m
}

// sleep waits for d or until ctx ends. Nemesis timing only: never used to
// wait for something to happen.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// between returns a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
