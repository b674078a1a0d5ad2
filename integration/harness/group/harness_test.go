// Package group_test runs the fault harness's short mode with the workers as members of one group.
// Each kind of lock has a package of its own under integration/harness,
// so that its pair of runs has go test's default timeout to itself.
package group_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/harnesstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a run's etcd members, is this test binary
// re-executed; it runs from init, before any test or server starts.
func init() { harnesstest.Init() }

// TestHarnessShortGroup is the lock package's TestHarnessShort with the
// workers as members of one etcdlock.Group whose partitions are the keys,
// joining and leaving every few seconds; the owner of partition k writes
// key k's resources with the partition's token: a resource is fenced by
// one partition's tokens.
func TestHarnessShortGroup(t *testing.T) {
	testenv.Long(t, "the fault harness: a fenced run and its control, minutes each")
	harnesstest.Pair(t, harnesstest.Servers(t), func(c *harness.Config) { c.Kind = harness.KindGroup })
}
