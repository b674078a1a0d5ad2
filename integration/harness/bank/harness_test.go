// Package bank_test runs the fault harness's short mode with Jepsen's bank
// workload instead of the register.
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package bank_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/harnesstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a run's etcd members, is this test binary
// re-executed; it runs from init, before any test or server starts.
func init() { harnesstest.Init() }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHarnessBankLivenessControl is the bank's liveness control: its
// fenced run with PostgreSQL's writes built WithoutPreemption (the library
// before issue 47) while the nemesis freezes holders (5 s, TTL 1 s) and
// injects no other fault. A holder frozen in its transfer's transaction
// keeps its rows locked, and the next holder of its accounts waits for it
// as long as it is frozen: the checker must find that stall past its
// bound (the lease and 1 s), and no safety violation. It runs beside the
// pair (each run has its own names, cluster and workers), capped at two
// minutes, far inside the binary's timeout.
func TestHarnessBankLivenessControl(t *testing.T) {
	testenv.Long(t, "the fault harness: a bank run without preemption, until it stalls (tens of seconds)")
	t.Parallel()
	harnesstest.LivenessControl(t, harnesstest.Servers(t), "harness-bank-liveness-control")
}

// TestHarnessShortBank runs the bank workload (go run ./cmd/fencecheck
// -kind bank): the run's keys are accounts, each starting at 100 in
// PostgreSQL rows, a fence/etcd Store and a fence/s3 Store; each worker
// section takes two accounts' locks with LockAll and moves a random amount
// between them on every store, while the nemesis pauses, kills and
// partitions the workers and crashes and replaces etcd members. Fenced
// (reads that claim: Table.GetForUpdate, Store.Update), the checker must
// find every acknowledged transfer reflected once and the money conserved
// on every store, and no stall past the liveness bound; the control (plain reads, then fenced writes: the code
// the user wrote) must lose money on PostgreSQL, and what it does
// on the KV stores is reported. FENCECHECK_SEED replays a seed; go test
// -short skips the test outside CI.
func TestHarnessShortBank(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced run and its control, minutes each")
	t.Parallel()
	harnesstest.Pair(t, harnesstest.Servers(t), func(c *harness.Config) { c.SetKind(harness.KindBank) })
}
