package etcdlock_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The property tests: one table of rows, one per kind of lock, and one
// harness. Each row drives many operations by several Clients under a
// seeded request-fault injector (late deliveries, lost replies, second
// copies), with random cancellations, deadlines and failed Unlocks; each
// row's control reverts one protection and must find the violation it
// guards against, or the row proves nothing. The files:
//   - property_run_test.go: the harness (the seeded schedule, the fault
//     injection, the control's early stop);
//   - property_record_test.go and property_tracker_test.go: the history,
//     etcd's record and the library's view;
//   - property_check_test.go: the checker of the record against the grants;
//   - property_queue_test.go: the driver of the kinds whose acquisitions
//     return Locks; property_group_test.go: the group's churn.

var (
	propSeed = flag.Uint64("etcdlock.seed", 0, "seed of the property tests (0: from the clock)")
	propSoak = flag.Bool("etcdlock.soak", false, "run the property tests 10 times longer")
)

// propRow is one row of the property table: a kind, how it is driven,
// and its control.
type propRow struct {
	name     string
	fixed    propRun
	control  propRun  // the control's shape; its reverted run stops at the first violation it wants
	want     []string // what the control must find with the protection reverted (any of them); none: no control
	fixedToo bool     // the control's shape runs against the fixed code too, which must find nothing
	opts     []etcdlock.Option
	revert   []etcdlock.Option // every owner's in a reverted run (a row may also read propEnv.reverted)
	driver   func(*propEnv) propDriver
}

// propRun is the shape of one run.
type propRun struct {
	ops, raceOps int64         // stop after this many operations (under the race detector: raceOps); 0: at the budget
	budget       time.Duration // or after this long
	owners       int           // Clients on one faulty etcd client
	perOwner     int           // goroutines per owner (the driver's, without owners)
	names        int
	faultRate    float64
	maxLate      time.Duration // late deliveries up to this long after the caller gave up
	faultOn      reqfault.Match
	faultKinds   []reqfault.Kind // none: all
	need         map[string]int  // counts a fixed run must reach to prove anything; "faults" defaults to ops/10
	linger       time.Duration   // how long keys may outlive their owners' Close (a min hold's lease)
	permits      int             // a semaphore's (0: propPermits)
}

const (
	propOwners  = 6
	propTTL     = 2 * time.Second
	propCleanup = 150 * time.Millisecond
	propMaxLate = 150 * time.Millisecond
	propHold    = 1200 * time.Millisecond // the minhold row's
)

// queued is a fixed run of 10,000 acquisitions (2,000 under the race
// detector) of 8 names by 24 goroutines of 6 Clients, 4% of requests faulty.
var queued = propRun{ops: 10_000, raceOps: 2_000, budget: 110 * time.Second, owners: propOwners, perOwner: 4,
	names: 8, faultRate: 0.04, maxLate: propMaxLate}

// propRows is the table. A row's name is its subtest's in TestProperty
// and TestPropertyControl.
func propRows() []propRow {
	shared := queued
	shared.need = map[string]int{"most holders": 2} // readers, or a semaphore's holders, must have shared a name
	return []propRow{{
		// No two holders of a name at once while both leases are alive;
		// every granted key was its queue's head with its key alive. The
		// control's cleanups delete whatever key is in their slot.
		name: "lock", fixed: queued, driver: queueKind(lockOp),
		control: propRun{ops: 250, budget: 40 * time.Second, owners: propOwners, perOwner: 1, names: 2, faultRate: 0.1,
			maxLate: time.Second, faultOn: deletes(""), faultKinds: []reqfault.Kind{reqfault.Late}},
		want: []string{"two holders"}, fixedToo: true, revert: []etcdlock.Option{etcdlock.UnconditionalReleaseForTest()},
	}, {
		// 2 permits: never more than 2 live holders, never two on a slot,
		// a slot's tokens increasing, each claim made with fewer than 2
		// acquisitions queued before it. The control's releases delete
		// every slot their claims tried, whoever holds it (late claims
		// make the slot someone else's).
		name: "semaphore", fixed: shared, driver: queueKind(semaphoreOp),
		control: propRun{ops: 150, budget: 30 * time.Second, owners: propOwners, perOwner: 2, names: 1, faultRate: 0.2,
			maxLate: 100 * time.Millisecond, faultOn: claims, faultKinds: []reqfault.Kind{reqfault.Late}},
		want: []string{"slot key deleted", "two holders of slot"}, fixedToo: true,
		revert: []etcdlock.Option{etcdlock.UnconditionalSlotReleaseForTest()},
	}, {
		// Semaphores of 1 permit, whose waiters claim the slot in the
		// read that follows a blocker's deletion, and give it back when
		// that read says the turn has not come (the blocker gave up
		// waiting, as one acquisition in two does here), for 25 s while a
		// fifth of the claims and give-backs arrive late, twice or lose
		// their reply: never two live holders, every holder claimed in its
		// turn, no slot given back by its holder. At least 100
		// acquisitions and 20 give-backs, also under the race detector
		// (about 2,400 and 600 without it, 140–540 and 50–160 with it).
		// The control's give-backs, each delivered twice, delete the
		// slot's key whoever's it is.
		name: "optimistic", driver: queueKind(semaphoreOp),
		fixed: propRun{budget: 25 * time.Second, owners: propOwners, perOwner: 2, names: 2, permits: 1,
			faultRate: 0.2, maxLate: propMaxLate, faultOn: claimsOrGiveBacks, need: map[string]int{"ops": 100, "give-backs": 20, "faults": 50}},
		control: propRun{ops: 300, budget: 30 * time.Second, owners: propOwners, perOwner: 2, names: 1, permits: 1, faultRate: 1,
			maxLate: 100 * time.Millisecond, faultOn: givesBack, faultKinds: []reqfault.Kind{reqfault.Twice}},
		want: []string{"slot key deleted", "two holders of slot"}, fixedToo: true,
		revert: []etcdlock.Option{etcdlock.UnconditionalGiveBackForTest()},
	}, {
		// 2 readers for each writer: never a writer beside another live
		// holder, every holder granted only once the blockers queued
		// before it were gone. The control's writers wait only for writers.
		name: "rwlock", fixed: shared, driver: queueKind(rwOp),
		control: with(queued, func(r *propRun) { r.budget = 30 * time.Second }),
		want:    []string{"writer beside", "before its turn"}, revert: []etcdlock.Option{etcdlock.WritersIgnoreReadersForTest()},
	}, {
		// LockAll of 2 or 3 of 8 names in random orders: no partial
		// MultiLock, no two holders, no deadlock (the sets finish).
		name: "lockall", driver: queueKind(lockAllOp),
		fixed: with(queued, func(r *propRun) { r.ops, r.raceOps, r.budget, r.perOwner = 300, 100, 60*time.Second, 2 }),
	}, {
		// Workers join, leave, have their leases revoked and are cut off
		// past their TTL: never two works of a partition running with
		// live leases, tokens increasing, every partition owned and the
		// share balanced within one after the churn. The control's
		// workers release a partition before its work has returned.
		name: "group", driver: newGroupDriver,
		fixed: propRun{budget: 25 * time.Second, perOwner: 1, faultRate: 0.05, maxLate: propMaxLate,
			need: map[string]int{"faults": 20, "joins": 5, "leaves": 3}},
		control: propRun{budget: 20 * time.Second, perOwner: 1, faultRate: 0.03, maxLate: propMaxLate},
		want:    []string{"runs with its lease alive"},
	}, {
		// Three machines run a job with TryLock, WithMinHold and Unlock
		// while a third of their transactions and lease grants go wrong:
		// successive runs start at least the hold apart. The control
		// takes no hold.
		name: "minhold", driver: queueKind(minHoldOp, minHoldApart), opts: []etcdlock.Option{etcdlock.WithCleanupTimeout(300 * time.Millisecond)},
		// 20 holds: with a third of the requests faulty, 8 made 2-4 runs,
		// and in CI once 1, too few to prove anything.
		fixed:   propRun{linger: 4 * time.Second, budget: 20 * propHold, owners: 3, perOwner: 1, names: 1, faultRate: 0.33, maxLate: 200 * time.Millisecond, faultOn: txnsAndGrants, need: map[string]int{"ops": 2}},
		control: propRun{budget: 8 * propHold, owners: 3, perOwner: 1, names: 1, faultRate: 0.33, maxLate: 200 * time.Millisecond, faultOn: txnsAndGrants},
		want:    []string{"closer than the hold"},
	}}
}

func with(r propRun, f func(*propRun)) propRun { f(&r); return r }

// TestProperty runs each row's fixed run: no violation, and enough
// operations and faults to prove something. Replay a run with
// -etcdlock.seed (each run logs its command); -etcdlock.soak runs ten
// times longer.
func TestProperty(t *testing.T) {
	testenv.Long(t, "property tests: random request faults")
	for _, row := range propRows() {
		t.Run(row.name, func(t *testing.T) {
			// Each row has its own etcd server and Clients; rows wait on
			// request faults' delays and timeouts as much as they compute.
			t.Parallel()
			cfg := row.fixed
			if raceEnabled && cfg.raceOps > 0 {
				cfg.ops = cfg.raceOps
			}
			if *propSoak {
				cfg.ops, cfg.budget = 10*cfg.ops, 10*cfg.budget
			}
			st := runRow(t, row, cfg, false)
			if len(st.violations) > 0 {
				t.Fatalf("%d violations (seed %d), first: %v", len(st.violations), st.seed, st.violations[:min(10, len(st.violations))])
			}
			if err := st.enough(cfg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPropertyControl runs each row's control: with the protection
// reverted the row must find the violation it wants, or it proves
// nothing; where fixedToo, the fixed code under the same faults finds
// none.
func TestPropertyControl(t *testing.T) {
	testenv.Long(t, "property tests' controls")
	for _, row := range propRows() {
		if len(row.want) == 0 {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			if row.fixedToo {
				t.Run("fixed", func(t *testing.T) {
					if st := runRow(t, row, row.control, false); len(st.violations) > 0 {
						t.Fatalf("%d violations, first: %v", len(st.violations), st.violations[:min(5, len(st.violations))])
					}
				})
			}
			t.Run("reverted", func(t *testing.T) {
				cfg := row.control
				cfg.ops = 0 // until the first violation wanted, or the budget
				st := runRow(t, row, cfg, true)
				for _, v := range st.violations[:min(3, len(st.violations))] {
					t.Logf("  %s", v)
				}
				if !hasWanted(st.violations, row.want) {
					t.Fatalf("control (seed %d): no violation %q with the protection reverted; the test proves nothing", st.seed, row.want)
				}
			})
		})
	}
}

func wanted(v string, want []string) bool {
	return slices.ContainsFunc(want, func(w string) bool { return strings.Contains(v, w) })
}

// enough reports a fixed run that did too little to prove anything.
func (st propStats) enough(cfg propRun) error {
	need := map[string]int{"ops": int(cfg.ops), "faults": int(cfg.ops / 10)}
	for k, n := range cfg.need {
		need[k] = n
	}
	for k, n := range need {
		if st.counts[k] < n {
			return fmt.Errorf("%d %s in %v, want at least %d: too little to prove anything", st.counts[k], k, cfg.budget, n)
		}
	}
	return nil
}

// claims matches a semaphore's claims of a permit slot: transactions that
// put a key under a semaphore's "p/", also in a nested transaction (an
// optimistic claim, in a read of the queue).
func claims(_ string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	return ok && putsSlot(txn.Success)
}

func putsSlot(ops []*pb.RequestOp) bool {
	for _, op := range ops {
		if p := op.GetRequestPut(); p != nil && isSlotKey(p.Key) {
			return true
		}
		if n := op.GetRequestTxn(); n != nil && (putsSlot(n.Success) || putsSlot(n.Failure)) {
			return true
		}
	}
	return false
}

// givesBack matches a semaphore's give-backs: transactions that delete a
// key under a semaphore's "p/" themselves (a release deletes them in
// nested transactions).
func givesBack(_ string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if d := op.GetRequestDeleteRange(); d != nil && isSlotKey(d.Key) {
			return true
		}
	}
	return false
}

func isSlotKey(k []byte) bool {
	return strings.Contains(string(k), "/sem/") && strings.Contains(string(k), "/p/")
}

// claimsOrGiveBacks matches claims and give-backs.
func claimsOrGiveBacks(method string, req any) bool {
	return claims(method, req) || givesBack(method, req)
}

// txnsAndGrants matches transactions and lease grants (a min hold's).
func txnsAndGrants(method string, req any) bool {
	return reqfault.Method("KV/Txn")(method, req) || reqfault.Method("Lease/LeaseGrant")(method, req)
}
