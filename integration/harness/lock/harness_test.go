// Package lock_test runs the fault harness's short mode with the workers
// taking locks (what go run ./cmd/fencecheck runs).
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package lock_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness/harnesstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a run's etcd members, is this test binary
// re-executed; it runs from init, before any test or server starts.
func init() { harnesstest.Init() }

// TestHarnessShort runs the fault harness's short mode: worker processes
// lock and write to PostgreSQL, S3, etcd and SQLite while the nemesis
// pauses, kills and partitions them, crashes (SIGKILL) and restarts etcd
// member processes, and replaces members through etcd's membership API.
// Each run goes on until it reaches harness.ShortMinimums (about a minute
// on a loaded 2-core machine). Fenced, the checker must find no
// violation; with fencing off and the same seed (the control), it must
// find a stale write landing on every kind of resource. FENCECHECK_SEED
// replays a seed; go test -short skips the test outside CI.
func TestHarnessShort(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced run and its control, minutes each")
	harnesstest.Pair(t, harnesstest.Servers(t), nil)
}
