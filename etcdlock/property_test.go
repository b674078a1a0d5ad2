package etcdlock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

var (
	propSeed = flag.Uint64("etcdlock.seed", 0, "seed of the request-fault property test (0: from the clock)")
	propSoak = flag.Bool("etcdlock.soak", false, "run the request-fault property test 10 times longer")
)

// propConfig is one run of the property test.
type propConfig struct {
	seed         uint64
	ctl          []etcdlock.Option // a control run's (e.g. UnconditionalReleaseForTest), for every owner's Client
	acquisitions int64             // stop after this many
	budget       time.Duration     // or after this long
	faultRate    float64
	names        int
	perOwner     int             // goroutines per owner
	maxLate      time.Duration   // late deliveries up to this long after the caller gave up
	faultOn      reqfault.Match  // requests that may get faults (nil: all)
	faultKinds   []reqfault.Kind // kinds drawn (none: all)
	control      bool            // run with fix 1 reverted, stop soon after the first violation
}

// TestRequestFaultProperty drives many acquisitions by several owners of a
// few names, with random cancellations, deadlines and failed Unlocks, while
// a seeded injector delays requests past their callers' deadlines, drops
// replies and sends requests twice. It checks etcd's own record and the
// library's view: no two holders of a name at once while both leases are
// alive, every granted key was its queue's head with its key alive, nothing
// is left behind, and every lost lock's Done closed. Replay with
// -etcdlock.seed; -etcdlock.soak runs it ten times longer.
func TestRequestFaultProperty(t *testing.T) {
	testenv.Long(t, "a property test: random request faults")
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	// 20-40 s on a 2-core machine; the budget leaves room for CI, where the
	// integration package's fault harness runs at the same time.
	cfg := propConfig{seed: seed, acquisitions: 10_000, budget: 110 * time.Second, faultRate: 0.04, names: 8, perOwner: 4, maxLate: 150 * time.Millisecond}
	if raceEnabled { // the race detector makes everything 5-10 times slower
		cfg.acquisitions = 2_000
	}
	if *propSoak {
		cfg.acquisitions, cfg.budget = 100_000, 10*time.Minute
	}
	t.Logf("seed %d (replay: go test -run TestRequestFaultProperty ./etcdlock -etcdlock.seed %d)", seed, seed)
	st := runProperty(t, cfg)
	t.Logf("%d acquisitions, %d Lock errors, %d Unlock errors, %d lost, faults %v, in %v",
		st.acquired, st.lockErrs, st.unlockErrs, st.lost, st.faults, st.elapsed.Round(time.Millisecond))
	if len(st.violations) > 0 {
		t.Fatalf("%d violations (seed %d), first: %v", len(st.violations), seed, st.violations[:min(10, len(st.violations))])
	}
	if st.acquired < cfg.acquisitions {
		t.Fatalf("%d acquisitions in %v, want %d", st.acquired, cfg.budget, cfg.acquisitions)
	}
	if n := st.totalFaults(); n < int(cfg.acquisitions/10) {
		t.Fatalf("%d request faults injected, want at least %d", n, cfg.acquisitions/10)
	}
}

// TestRequestFaultPropertyControl is the control: with cleanups that delete
// whatever key is in their slot (fix 1 reverted) the same test must find a
// second holder, or it proves nothing. The same faults against the fixed
// code find none.
func TestRequestFaultPropertyControl(t *testing.T) {
	testenv.Long(t, "a property test's control")
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	// The faults that matter here: releases delivered well after their
	// caller gave up, when the slot has been reused; and few enough
	// contenders that the reused key is often held, not queued.
	cfg := propConfig{seed: seed, acquisitions: 250, budget: 40 * time.Second, faultRate: 0.1, names: 2,
		perOwner: 1, maxLate: time.Second, faultOn: deletes(""), faultKinds: []reqfault.Kind{reqfault.Late}}
	t.Logf("seed %d (replay: go test -run TestRequestFaultPropertyControl ./etcdlock -etcdlock.seed %d)", seed, seed)
	t.Run("fixed", func(t *testing.T) {
		st := runProperty(t, cfg)
		t.Logf("fixed: %d acquisitions, faults %v, in %v", st.acquired, st.faults, st.elapsed.Round(time.Millisecond))
		if len(st.violations) > 0 {
			t.Fatalf("%d violations, first: %v", len(st.violations), st.violations[:min(5, len(st.violations))])
		}
	})
	t.Run("fix 1 reverted", func(t *testing.T) {
		cfg.acquisitions, cfg.control = 20_000, true
		cfg.ctl = []etcdlock.Option{etcdlock.UnconditionalReleaseForTest()}
		st := runProperty(t, cfg)
		t.Logf("control: %d acquisitions, faults %v, in %v; violations: %d", st.acquired, st.faults, st.elapsed.Round(time.Millisecond), len(st.violations))
		for _, v := range st.violations[:min(3, len(st.violations))] {
			t.Logf("  %s", v)
		}
		for _, v := range st.violations {
			if strings.HasPrefix(v, "two holders") {
				return
			}
		}
		t.Fatalf("control (seed %d): no second holder found with fix 1 reverted; the test proves nothing", seed)
	})
}

type propStats struct {
	acquired, lockErrs, unlockErrs, lost int64
	faults                               map[reqfault.Kind]int
	violations                           []string
	elapsed                              time.Duration
	most                                 int // the most holders of one name at once (property_kinds_test.go)
}

func (s propStats) totalFaults() int {
	n := 0
	for _, c := range s.faults {
		n += c
	}
	return n
}

const (
	propOwners   = 6
	propPerOwner = 4
	propTTL      = 2 * time.Second
	propCleanup  = 150 * time.Millisecond
	propMaxLate  = 150 * time.Millisecond
)

func runProperty(t *testing.T, cfg propConfig) propStats {
	eps := propServer(t)
	direct := etcdClient(t, eps...)
	fcli, in := faulty(t, cfg.seed, eps...)
	rec, err := watchRecord(t.Context(), direct, prefix(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	owners := make([]*etcdlock.Client, propOwners)
	for i := range owners {
		owners[i] = newLocker(t, fcli, append([]etcdlock.Option{etcdlock.WithTTL(propTTL), etcdlock.WithCleanupTimeout(propCleanup)}, cfg.ctl...)...)
	}
	in.Random(cfg.faultRate, cfg.maxLate, cfg.faultOn, cfg.faultKinds...)
	var st propStats
	var acquired, lockErrs, unlockErrs atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), cfg.budget)
	defer cancel()
	start := time.Now()
	var unlocked sync.Map // locks whose Unlock failed -> true
	if cfg.control {
		go func() { // stop at the first second holder either view sees
			for ctx.Err() == nil && tr.found() == 0 && !rec.twoHolders(tr) {
				time.Sleep(200 * time.Millisecond)
			}
			cancel()
		}()
	}
	var wg sync.WaitGroup
	for i := range propOwners * cfg.perOwner {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
		c := owners[i%propOwners]
		wg.Go(func() {
			for ctx.Err() == nil && acquired.Load() < cfg.acquisitions {
				l, err := propAcquire(ctx, rng, c, cfg.names)
				if err != nil {
					lockErrs.Add(1)
					continue
				}
				acquired.Add(1)
				tr.grant(l)
				if d := rng.IntN(4); d > 0 { // the work under the lock
					time.Sleep(time.Duration(d) * 500 * time.Microsecond)
				}
				tr.release(l)
				if err := propUnlock(rng, l); err != nil {
					unlockErrs.Add(1)
					unlocked.Store(l, true)
				}
			}
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	in.Heal()
	st.faults = in.Counts()
	st.acquired, st.lockErrs, st.unlockErrs = acquired.Load(), lockErrs.Load(), unlockErrs.Load()
	st.violations = append(st.violations, tr.violations...)
	st.violations = append(st.violations, settleProperty(t, tr, rec, owners, in, &unlocked, &st)...)
	return st
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

// propAcquire takes a random name with Lock (or TryLock), under a random
// deadline or a cancellation at a random moment.
func propAcquire(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, names int) (*etcdlock.Lock, error) {
	name := fmt.Sprintf("n%d", rng.IntN(names))
	d := time.Duration(5+rng.IntN(250)) * time.Millisecond
	var lctx context.Context
	var cancel context.CancelFunc
	if rng.IntN(2) == 0 {
		lctx, cancel = context.WithTimeout(ctx, d)
	} else {
		lctx, cancel = context.WithCancel(ctx)
		stop := time.AfterFunc(d, cancel)
		defer stop.Stop()
	}
	defer cancel()
	if rng.IntN(10) == 0 {
		return c.TryLock(lctx, name)
	}
	return c.Lock(lctx, name)
}

// propUnlock unlocks with a short deadline (a request held by a fault keeps
// the name from everyone until the deadline), one time in ten too short to
// succeed.
func propUnlock(rng *rand.Rand, l *etcdlock.Lock) error {
	d := 200 * time.Millisecond
	if rng.IntN(10) == 0 {
		d = time.Duration(rng.IntN(2000)) * time.Microsecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Unlock(ctx)
}

// settleProperty waits for failed Unlocks to finish in the background,
// checks etcd's record, closes the owners and checks nothing is left.
func settleProperty(t *testing.T, tr *tracker, rec *record, owners []*etcdlock.Client, in *reqfault.Injector, unlocked *sync.Map, st *propStats) []string {
	var bad []string
	deadline := time.After(propTTL + 10*time.Second)
	unlocked.Range(func(k, _ any) bool {
		l := k.(*etcdlock.Lock)
		select {
		case <-l.Done():
		case <-deadline:
			bad = append(bad, fmt.Sprintf("token %d: Done still open 10s after a failed Unlock", l.Token()))
		}
		return true
	})
	in.Close() // no late request arrives after this
	resp, err := rec.direct.Put(t.Context(), prefix(t)+"end", "")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := rec.catchUp(cctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	bad = append(bad, rec.check(tr.granted)...)
	for _, tok := range rec.foreign { // every lock taken from its owner noticed it
		if l := tr.granted[tok]; l != nil {
			select {
			case <-l.Done():
				if !errors.Is(l.Err(), etcdlock.ErrLost) {
					bad = append(bad, fmt.Sprintf("token %d: key taken, Err %v", tok, l.Err()))
				}
			case <-time.After(propTTL + time.Second):
				bad = append(bad, fmt.Sprintf("token %d: key taken, Done still open", tok))
			}
		}
	}
	for _, l := range tr.granted {
		if errors.Is(l.Err(), etcdlock.ErrLost) {
			st.lost++
		}
	}
	for _, c := range owners {
		c.Close(t.Context())
	}
	if ks := keys(t, rec.direct, keysOf(t).Locks()); len(ks) != 0 {
		bad = append(bad, fmt.Sprintf("queue keys left after closing every owner: %v", ks))
	}
	if ks := keys(t, rec.direct, keysOf(t).Markers()); len(ks) != 0 {
		bad = append(bad, fmt.Sprintf("lane markers left after closing every owner: %v", ks))
	}
	return bad
}
