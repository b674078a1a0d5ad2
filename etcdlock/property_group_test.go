package etcdlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// groupDriver is the group row's: its one goroutine churns a group of
// 64 partitions (joins, leaves, revoked leases, workers paused past their
// TTL), each worker behind its own proxy (to pause it) and fault
// injector; groupRuns records the works and checks them.
type groupDriver struct {
	e         *propEnv
	runs      *groupRuns
	stopDelay time.Duration // a work's time to stop once its context ends
	opts      []etcdlock.JoinOption

	mu      sync.Mutex // guards workers, seq
	workers []*churnWorker
	seq     uint64
}

// churnWorker is one worker: its proxy, Client and Join.
type churnWorker struct {
	proxy *netproxy.Proxy
	c     *etcdlock.Client
	stop  func() error
}

const (
	churnPartitions = 64
	churnMaxWorkers = 6
)

// newGroupDriver starts 3 workers. In the control, a worker releases a
// partition taken away before its work has returned (HandoffFirstForTest),
// and works are slower to stop.
func newGroupDriver(e *propEnv) propDriver {
	d := &groupDriver{e: e, runs: newGroupRuns(), stopDelay: 20 * time.Millisecond}
	if e.reverted {
		d.stopDelay, d.opts = 50*time.Millisecond, []etcdlock.JoinOption{etcdlock.HandoffFirstForTest()}
	}
	for range 3 {
		d.join()
	}
	return d
}

func (d *groupDriver) join() {
	t := d.e.t
	p, err := netproxy.Start(strings.TrimPrefix(d.e.eps[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d.mu.Lock()
	d.seq++
	seed := d.e.seed + d.seq
	d.mu.Unlock()
	c := newLocker(t, d.e.faulty(seed, "http://"+p.Addr()), etcdlock.WithTTL(propTTL), etcdlock.WithCleanupTimeout(propCleanup))
	w := &churnWorker{proxy: p, c: c}
	w.stop = joinGroup(t, group(t, c, "churn", churnPartitions), d.runs.work(d.stopDelay), d.opts...)
	d.mu.Lock()
	d.workers = append(d.workers, w)
	d.mu.Unlock()
	d.e.add("joins", 1)
}

// op waits a moment, then joins a worker, makes one leave, revokes one's
// lease (as expiry would; it joins again), or pauses one past its TTL
// (cut off, then gone for good).
func (d *groupDriver) op(ctx context.Context, rng *rand.Rand, _ int) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond):
	}
	d.mu.Lock()
	n := len(d.workers)
	d.mu.Unlock()
	switch a := rng.IntN(10); {
	case a < 4 && n < churnMaxWorkers || n < 2:
		d.join()
	case a < 7:
		go d.pick(rng, true).stop() // its works end, then its partitions go
		d.e.add("leaves", 1)
	case a < 8:
		if lease := sessionLease(d.pick(rng, false).c); lease != 0 {
			d.runs.revoke(lease)
			d.e.direct.Revoke(context.Background(), lease)
			d.e.add("revokes", 1)
		}
	default:
		w := d.pick(rng, true)
		w.proxy.Cut()
		go func() {
			time.Sleep(propTTL + 500*time.Millisecond)
			w.proxy.Heal()
			w.stop()
		}()
		d.e.add("pauses", 1)
	}
	return true
}

// pick returns a random worker, taken out of the group's when remove.
func (d *groupDriver) pick(rng *rand.Rand, remove bool) *churnWorker {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := rng.IntN(len(d.workers))
	w := d.workers[i]
	if remove {
		d.workers = append(d.workers[:i], d.workers[i+1:]...)
	}
	return w
}

func (d *groupDriver) seen() []string { return d.runs.check() }

// settle checks that, the churn over, every partition is owned and the
// share balanced within a bound, then that no key is left once every
// worker has left (not in the control, whose handoff is broken).
func (d *groupDriver) settle() []string {
	t := d.e.t
	d.mu.Lock()
	alive := d.workers
	d.mu.Unlock()
	if !d.e.reverted {
		start := time.Now()
		groupSettled(t, group(t, newLocker(t, d.e.direct), "churn", churnPartitions), len(alive), 3*propTTL+5*time.Second)
		d.e.add("settle ms", int(time.Since(start).Milliseconds()))
	}
	for _, w := range alive {
		w.stop()
	}
	bad := d.runs.check()
	if d.e.reverted {
		return bad
	}
	deadline := time.Now().Add(2 * propTTL)
	for len(keys(t, d.e.direct, prefix(t)+"group/")) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // paused workers' keys go with their leases
	}
	if ks := keys(t, d.e.direct, prefix(t)+"group/"); len(ks) > 0 {
		bad = append(bad, fmt.Sprintf("keys left after every worker left: %v", ks))
	}
	return bad
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
