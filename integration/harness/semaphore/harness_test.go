// Package semaphore_test runs the fault harness's short mode with the workers taking a semaphore's permits.
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package semaphore_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/harnesstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a run's etcd members, is this test binary
// re-executed; it runs from init, before any test or server starts.
func init() { harnesstest.Init() }

// TestHarnessShortSemaphore is the lock package's TestHarnessShort with the
// workers taking a permit of one semaphore with a permit per key, each
// writing its slot's key with its token: a resource is fenced by one
// slot's tokens.
func TestHarnessShortSemaphore(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced run and its control, minutes each")
	harnesstest.Pair(t, harnesstest.Servers(t), func(c *harness.Config) { c.Kind = harness.KindSemaphore })
}
