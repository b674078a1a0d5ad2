// Package rw_test runs the fault harness's short mode with read/write locks.
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package rw_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/harnesstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a run's etcd members, is this test binary
// re-executed; it runs from init, before any test or server starts.
func init() { harnesstest.Init() }

// TestHarnessShortRW is the lock package's TestHarnessShort with read/write
// locks: half the sections a writer, writing with its token, half a reader,
// reading only; the resources are fenced by the writers' tokens.
func TestHarnessShortRW(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced run and its control, minutes each")
	harnesstest.Pair(t, harnesstest.Servers(t), func(c *harness.Config) { c.Kind = harness.KindRW })
}
