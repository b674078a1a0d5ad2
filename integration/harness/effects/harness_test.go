// Package effects_test runs the fault harness's short mode with the
// outbox's workload: transfers that record their side effects in a
// fenced PostgreSQL outbox, delivered by dispatchers to an HTTP receiver
// and a JetStream stream.
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package effects_test

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

// TestHarnessShortEffects runs the effects workload (go run
// ./cmd/fencecheck -kind effects): each worker section takes two
// accounts' locks with LockAll and, in one fenced PostgreSQL transaction
// (postgres.RunInTxAll), moves money between them and records an effect
// for an HTTP receiver (outbox.NewReceiver over fence/postgres's Store)
// and one for a JetStream stream (postgres.Outbox.Record); dispatchers
// (outbox.Dispatcher, as partition owners of an etcdlock Group) inside
// the worker processes deliver them, while the nemesis pauses, kills and
// partitions the workers and crashes and replaces etcd members. Fenced,
// the checker must find every transfer PostgreSQL committed applied
// exactly once on each receiver and no effect of one it did not; the
// control, which sends the effects straight from the transaction before
// its commit, must apply the effect of a transfer that did not land, or
// one twice. FENCECHECK_SEED replays a seed; go test -short skips the
// test outside CI.
func TestHarnessShortEffects(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced effects run and its control, a minute or two each")
	harnesstest.Pair(t, harnesstest.Servers(t), func(c *harness.Config) { c.SetKind(harness.KindEffects) })
}
