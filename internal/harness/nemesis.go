package harness

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/internal/embedetcd"
)

// FaultKind names a kind of fault the nemesis injects.
type FaultKind string

// The fault kinds.
const (
	FaultPause     FaultKind = "pause"     // SIGSTOP a holder after its guard check, past its lease; SIGCONT
	FaultKill      FaultKind = "kill"      // SIGKILL a holder as it writes; start a fresh worker
	FaultMember    FaultKind = "member"    // SIGKILL an etcd member process (the leader half the time); restart it
	FaultPartition FaultKind = "partition" // black-hole a worker's etcd traffic, then delay it, then heal
)

// FaultKinds lists every kind, in report order.
var FaultKinds = []FaultKind{FaultPause, FaultKill, FaultMember, FaultPartition}

// holdTimeout bounds the wait for an armed worker to reach a write.
const holdTimeout = 5 * time.Second

// nemesis injects faults, one goroutine per kind.
type nemesis struct {
	cfg    *Config
	fleet  *fleet
	etcd   *embedetcd.Cluster
	start  time.Time
	counts map[FaultKind]*atomic.Int64
	failed atomic.Int64 // faults given up on (no worker reached a write in time)
}

func newNemesis(cfg *Config, f *fleet, etcd *embedetcd.Cluster) *nemesis {
	n := &nemesis{cfg: cfg, fleet: f, etcd: etcd, start: time.Now(), counts: map[FaultKind]*atomic.Int64{}}
	for _, k := range FaultKinds {
		n.counts[k] = &atomic.Int64{}
	}
	return n
}

// loopsPerKind is how many loops inject each kind at once. Pauses are the
// slowest fault (the lease must run out each time), so two loops pause two
// different workers at once.
var loopsPerKind = map[FaultKind]int{FaultPause: 2, FaultKill: 1, FaultMember: 1, FaultPartition: 1}

// run injects faults of every kind until each has been injected
// FaultsPerKind times and MinDuration has passed, or ctx ends.
func (n *nemesis) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, k := range FaultKinds {
		for j := range loopsPerKind[k] {
			rng := rand.New(rand.NewPCG(uint64(n.cfg.Seed), uint64(100*j+i+1)))
			wg.Go(func() { n.loop(ctx, k, rng) })
		}
	}
	wg.Wait()
}

func (n *nemesis) loop(ctx context.Context, kind FaultKind, rng *rand.Rand) {
	for ctx.Err() == nil && !n.enough(kind) {
		if n.inject(ctx, kind, rng) {
			if c := n.counts[kind].Add(1); c%5 == 0 {
				n.cfg.logf("nemesis: %d %s faults", c, kind)
			}
		} else {
			n.failed.Add(1)
		}
		sleep(ctx, between(rng, 100*time.Millisecond, 600*time.Millisecond))
	}
}

func (n *nemesis) enough(kind FaultKind) bool {
	return n.counts[kind].Load() >= int64(n.cfg.FaultsPerKind) && time.Since(n.start) >= n.cfg.MinDuration
}

func (n *nemesis) inject(ctx context.Context, kind FaultKind, rng *rand.Rand) bool {
	switch kind {
	case FaultPause:
		return n.pause(ctx, rng)
	case FaultKill:
		return n.kill(ctx, rng)
	case FaultMember:
		return n.restartMember(ctx, rng)
	case FaultPartition:
		return n.partition(ctx, rng)
	}
	return false
}

// counted returns how many faults of each kind were injected.
func (n *nemesis) counted() map[FaultKind]int {
	m := map[FaultKind]int{}
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
