// Package election_test runs the fault harness's short mode with the workers as election candidates.
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package election_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/harnesstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a run's etcd members, is this test binary
// re-executed; it runs from init, before any test or server starts.
func init() { harnesstest.Init() }

// TestHarnessShortElection is the lock package's TestHarnessShort with the
// workers as election candidates: each leads a key's election with
// Client.Run and writes with its term's token (go run ./cmd/fencecheck
// -election).
func TestHarnessShortElection(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced run and its control, minutes each")
	harnesstest.Pair(t, harnesstest.Servers(t), func(c *harness.Config) { c.Election = true })
}
