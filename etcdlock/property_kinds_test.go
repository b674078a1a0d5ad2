package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The request-fault property test of TestRequestFaultProperty, for the
// semaphore and the read/write lock: many acquisitions under request faults
// (late, lost replies, twice), random cancellations and deadlines and
// failed Unlocks, checked from etcd's own record (property_kinds_check_test.go)
// and from the library's view.

// kindsConfig is one run of the property test of a semaphore or a
// read/write lock.
type kindsConfig struct {
	seed         uint64
	ctl          []etcdlock.Option // a control run's, for every owner's Client
	rw           bool              // read/write locks; else semaphores
	permits      int               // a semaphore's
	acquisitions int64
	budget       time.Duration
	faultRate    float64
	names        int
	perOwner     int
	maxLate      time.Duration
	faultOn      reqfault.Match
	faultKinds   []reqfault.Kind
	control      bool // a protection is reverted: stop soon after the first violation
}

// kindsDefaults is the configuration of the fixed runs: ≥ 10,000
// acquisitions (2,000 under the race detector) of 8 names by 24
// goroutines of 6 Clients, 4% of requests faulty.
func kindsDefaults(seed uint64, rw bool) kindsConfig {
	cfg := kindsConfig{seed: seed, rw: rw, permits: 2, acquisitions: 10_000, budget: 100 * time.Second,
		faultRate: 0.04, names: 8, perOwner: 4, maxLate: 150 * time.Millisecond}
	if raceEnabled {
		cfg.acquisitions = 2_000
	}
	if *propSoak {
		cfg.acquisitions, cfg.budget = 100_000, 10*time.Minute
	}
	return cfg
}

// TestSemaphoreFaultProperty checks semaphores of 2 permits: never more
// than 2 holders whose leases are alive at once, never two on one slot, a
// slot's tokens increasing, every claim made while fewer than 2
// acquisitions queued before it, no slot key deleted from a live holder
// but by its own release, nothing left behind. Replay with -etcdlock.seed.
func TestSemaphoreFaultProperty(t *testing.T) {
	testenv.Long(t, "a property test: random request faults on a semaphore")
	cfg := kindsDefaults(seedOf(t, "TestSemaphoreFaultProperty"), false)
	checkKinds(t, cfg)
}

// TestRWFaultProperty checks read/write locks, 2 readers for each writer:
// never a writer beside any other holder while both leases are alive,
// never a reader beside a writer, every holder granted only once the
// blockers queued before it were gone (by etcd's record), nothing left
// behind. Replay with -etcdlock.seed.
func TestRWFaultProperty(t *testing.T) {
	testenv.Long(t, "a property test: random request faults on read/write locks")
	cfg := kindsDefaults(seedOf(t, "TestRWFaultProperty"), true)
	checkKinds(t, cfg)
}

// TestSemaphoreFaultPropertyControl is the semaphore's control: with
// releases that delete every permit slot key their claims tried, whoever
// holds it now (the value compare reverted), the same test must find a
// holder's slot taken from it while its lease lives, or it proves nothing.
// The same faults against the fixed code find nothing.
func TestSemaphoreFaultPropertyControl(t *testing.T) {
	testenv.Long(t, "a property test's control")
	// Contention for the claims (many waiters of one semaphore of 2
	// permits), claims delivered late (held until their caller gives up:
	// meanwhile another waiter takes the slot), so that the release of a
	// waiter that gave up names a slot that is now someone else's.
	cfg := kindsConfig{seed: seedOf(t, "TestSemaphoreFaultPropertyControl"), permits: 2, acquisitions: 150,
		budget: 30 * time.Second, faultRate: 0.2, names: 1, perOwner: 2, maxLate: 100 * time.Millisecond,
		faultOn: claims, faultKinds: []reqfault.Kind{reqfault.Late}}
	t.Run("fixed", func(t *testing.T) {
		st := runKinds(t, cfg)
		t.Logf("fixed: %d acquisitions, faults %v, in %v", st.acquired, st.faults, st.elapsed.Round(time.Millisecond))
		if len(st.violations) > 0 {
			t.Fatalf("%d violations, first: %v", len(st.violations), st.violations[:min(5, len(st.violations))])
		}
	})
	t.Run("value compare reverted", func(t *testing.T) {
		cfg.acquisitions, cfg.control = 20_000, true
		cfg.ctl = []etcdlock.Option{etcdlock.UnconditionalSlotReleaseForTest()}
		st := runKinds(t, cfg)
		expectViolation(t, st, "slot key deleted", "two holders of slot")
	})
}

// TestRWFaultPropertyControl is the read/write lock's control: with
// writers that wait only for the writers queued before them (their wait
// for readers reverted), the same test must find a writer beside a
// reader.
func TestRWFaultPropertyControl(t *testing.T) {
	testenv.Long(t, "a property test's control")
	cfg := kindsDefaults(seedOf(t, "TestRWFaultPropertyControl"), true)
	cfg.acquisitions, cfg.budget, cfg.control = 2_000, 30*time.Second, true
	cfg.ctl = []etcdlock.Option{etcdlock.WritersIgnoreReadersForTest()}
	st := runKinds(t, cfg)
	expectViolation(t, st, "writer beside", "before its turn")
}

func seedOf(t *testing.T, name string) uint64 {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run '^%s$' ./etcdlock -etcdlock.seed %d)", seed, name, seed)
	return seed
}

// checkKinds runs cfg and fails on any violation, or on too few
// acquisitions or faults to prove anything.
func checkKinds(t *testing.T, cfg kindsConfig) {
	st := runKinds(t, cfg)
	t.Logf("%d acquisitions, %d errors of acquisitions, %d Unlock errors, %d lost, at most %d holders of a name at once, faults %v, in %v",
		st.acquired, st.lockErrs, st.unlockErrs, st.lost, st.most, st.faults, st.elapsed.Round(time.Millisecond))
	if len(st.violations) > 0 {
		t.Fatalf("%d violations (seed %d), first: %v", len(st.violations), cfg.seed, st.violations[:min(10, len(st.violations))])
	}
	if st.acquired < cfg.acquisitions {
		t.Fatalf("%d acquisitions in %v, want %d", st.acquired, cfg.budget, cfg.acquisitions)
	}
	if n := st.totalFaults(); n < int(cfg.acquisitions/10) {
		t.Fatalf("%d request faults injected, want at least %d", n, cfg.acquisitions/10)
	}
	if st.most < 2 { // readers, or a semaphore's holders, must have shared a name
		t.Fatalf("never more than %d holder of a name at once: the test proves nothing about sharing", st.most)
	}
}

// expectViolation fails unless st has a violation beginning with one of
// the kinds.
func expectViolation(t *testing.T, st propStats, kinds ...string) {
	t.Helper()
	t.Logf("control: %d acquisitions, faults %v, in %v; %d violations", st.acquired, st.faults, st.elapsed.Round(time.Millisecond), len(st.violations))
	for _, v := range st.violations[:min(3, len(st.violations))] {
		t.Logf("  %s", v)
	}
	for _, v := range st.violations {
		for _, k := range kinds {
			if strings.HasPrefix(v, k) {
				return
			}
		}
	}
	t.Fatalf("control: no violation %q found with the protection reverted; the test proves nothing", kinds)
}

// claims matches a semaphore's claims of a permit slot: transactions that
// put a key under a semaphore's "p/".
func claims(_ string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if p := op.GetRequestPut(); p != nil && strings.Contains(string(p.Key), "/sem/") && strings.Contains(string(p.Key), "/p/") {
			return true
		}
	}
	return false
}

func runKinds(t *testing.T, cfg kindsConfig) propStats {
	eps := propServer(t)
	direct := etcdClient(t, eps...)
	fcli, in := faulty(t, cfg.seed, eps...)
	rec, err := watchKindRecord(t.Context(), direct, prefix(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := newKindTracker(cfg, direct, prefix(t))
	owners := make([]*etcdlock.Client, propOwners)
	for i := range owners {
		owners[i] = newLocker(t, fcli, append([]etcdlock.Option{etcdlock.WithTTL(propTTL), etcdlock.WithCleanupTimeout(propCleanup)}, cfg.ctl...)...)
	}
	in.Random(cfg.faultRate, cfg.maxLate, cfg.faultOn, cfg.faultKinds...)
	var st propStats
	var acquired, lockErrs, unlockErrs atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), cfg.budget)
	defer cancel()
	if cfg.control {
		go func() { // stop soon after the first violation either view sees
			for ctx.Err() == nil && tr.found() == 0 && len(rec.foreignCopy()) == 0 {
				time.Sleep(100 * time.Millisecond)
			}
			cancel()
		}()
	}
	start := time.Now()
	var unlocked sync.Map // locks whose Unlock failed -> true
	var wg sync.WaitGroup
	for i := range propOwners * cfg.perOwner {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
		c := owners[i%propOwners]
		sems := make([]*etcdlock.Semaphore, cfg.names)
		for n := range sems {
			sems[n] = semaphore(t, c, fmt.Sprintf("n%d", n), max(1, cfg.permits))
		}
		wg.Go(func() {
			for ctx.Err() == nil && acquired.Load() < cfg.acquisitions {
				l, writer, err := kindAcquire(ctx, rng, c, sems, cfg)
				if err != nil {
					lockErrs.Add(1)
					continue
				}
				acquired.Add(1)
				tr.grant(ctx, l, writer)
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
	st.most = tr.mostHolding()
	st.violations = append(st.violations, tr.violationsCopy()...)
	st.violations = append(st.violations, settleKinds(t, cfg, tr, rec, owners, in, &unlocked, &st)...)
	return st
}

// kindAcquire takes a random name: a semaphore's permit, or a read/write
// lock as a reader (two times in three) or a writer; one time in ten with
// Try, under a random deadline or a cancellation at a random moment. It
// reports whether it took a writer's lock.
func kindAcquire(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, sems []*etcdlock.Semaphore, cfg kindsConfig) (*etcdlock.Lock, bool, error) {
	n := rng.IntN(cfg.names)
	d := time.Duration(5+rng.IntN(250)) * time.Millisecond
	if raceEnabled {
		// The race detector slows the embedded etcd server too: an
		// acquisition takes several of its requests, and with the fixed
		// runs' deadlines most would fail, few be granted.
		d *= 4
	}
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
	try := rng.IntN(10) == 0
	if !cfg.rw {
		if try {
			l, err := sems[n].TryAcquire(lctx)
			return l, false, err
		}
		l, err := sems[n].Acquire(lctx)
		return l, false, err
	}
	name := fmt.Sprintf("n%d", n)
	writer := rng.IntN(3) == 0
	var l *etcdlock.Lock
	var err error
	switch {
	case writer && try:
		l, err = c.TryLock(lctx, name)
	case writer:
		l, err = c.Lock(lctx, name)
	case try:
		l, err = c.TryRLock(lctx, name)
	default:
		l, err = c.RLock(lctx, name)
	}
	return l, writer, err
}

// settleKinds waits for failed Unlocks to finish in the background, checks
// etcd's record and what is left, closes the owners and checks nothing is
// left then.
func settleKinds(t *testing.T, cfg kindsConfig, tr *kindTracker, rec *kindRecord, owners []*etcdlock.Client, in *reqfault.Injector, unlocked *sync.Map, st *propStats) []string {
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
	granted := tr.grantedCopy()
	bad = append(bad, rec.check(cfg, granted)...)
	for _, tok := range rec.foreignCopy() { // every holder whose key was taken noticed it
		if g := granted[tok]; g != nil {
			select {
			case <-g.l.Done():
				if !errors.Is(g.l.Err(), etcdlock.ErrLost) {
					bad = append(bad, fmt.Sprintf("token %d: hold key taken, Err %v", tok, g.l.Err()))
				}
			case <-time.After(propTTL + time.Second):
				bad = append(bad, fmt.Sprintf("token %d: hold key taken, Done still open", tok))
			}
		}
	}
	for _, g := range granted {
		if errors.Is(g.l.Err(), etcdlock.ErrLost) {
			st.lost++
		}
	}
	if !cfg.rw {
		bad = append(bad, orphanSlots(t, rec)...)
	}
	for _, c := range owners {
		c.Close(t.Context())
	}
	k := keysOf(t)
	for _, dir := range []string{k.Locks(), k.Semaphores(), k.Markers()} {
		if ks := keys(t, rec.direct, dir); len(ks) != 0 {
			bad = append(bad, fmt.Sprintf("keys left under %s after closing every owner: %v", dir, ks))
		}
	}
	return bad
}

// TestLockAllFaultProperty drives LockAll of random overlapping sets of
// names in random orders under the same request faults, cancellations and
// failed Unlocks, and checks with TestRequestFaultProperty's record and
// tracker: every lock of every MultiLock granted was its queue's head with
// its key alive (no partial MultiLock), no two holders of a name while
// both leases live, no deadlock (the acquisitions finish), nothing left
// behind.
func TestLockAllFaultProperty(t *testing.T) {
	testenv.Long(t, "a property test: random request faults on LockAll")
	seed := seedOf(t, "TestLockAllFaultProperty")
	want := int64(300)
	if raceEnabled {
		want = 100
	}
	eps := propServer(t)
	direct := etcdClient(t, eps...)
	fcli, in := faulty(t, seed, eps...)
	rec, err := watchRecord(t.Context(), direct, prefix(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	owners := make([]*etcdlock.Client, propOwners)
	for i := range owners {
		owners[i] = newLocker(t, fcli, etcdlock.WithTTL(propTTL), etcdlock.WithCleanupTimeout(propCleanup))
	}
	in.Random(0.04, propMaxLate, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var sets, locks, errs atomic.Int64
	var unlocked sync.Map
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 2 * propOwners {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		c := owners[i%propOwners]
		wg.Go(func() {
			for ctx.Err() == nil && sets.Load() < want {
				m, err := lockAllRandom(ctx, rng, c)
				if err != nil {
					errs.Add(1)
					continue
				}
				sets.Add(1)
				for _, l := range m.Locks() {
					locks.Add(1)
					tr.grant(l)
				}
				time.Sleep(time.Duration(rng.IntN(3)) * 500 * time.Microsecond) // the work under the locks
				for _, l := range m.Locks() {
					tr.release(l)
				}
				uctx, ucancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				if m.Unlock(uctx) != nil {
					for _, l := range m.Locks() {
						unlocked.Store(l, true)
					}
				}
				ucancel()
			}
		})
	}
	wg.Wait()
	st := propStats{elapsed: time.Since(start)}
	in.Heal()
	st.faults = in.Counts()
	bad := append(slices.Clone(tr.violations), settleProperty(t, tr, rec, owners, in, &unlocked, &st)...)
	t.Logf("%d MultiLocks (%d locks), %d errors of LockAll, faults %v, in %v", sets.Load(), locks.Load(), errs.Load(), st.faults, st.elapsed.Round(time.Millisecond))
	if len(bad) > 0 {
		t.Fatalf("%d violations (seed %d), first: %v", len(bad), seed, bad[:min(10, len(bad))])
	}
	if sets.Load() < want {
		t.Fatalf("%d MultiLocks in 60s, want %d: deadlocked or starved", sets.Load(), want)
	}
}

// lockAllRandom takes 2 or 3 of 8 names, in a random order, under a random
// deadline.
func lockAllRandom(ctx context.Context, rng *rand.Rand, c *etcdlock.Client) (*etcdlock.MultiLock, error) {
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	d := time.Duration(20+rng.IntN(500)) * time.Millisecond
	if raceEnabled {
		d *= 4
	}
	lctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.LockAll(lctx, names[:2+rng.IntN(2)])
}
