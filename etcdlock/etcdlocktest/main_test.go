package etcdlocktest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

// TestMain lets this test binary, re-executed by the tests started
// WithMembers, be their member processes.
func TestMain(m *testing.M) {
	etcdlocktest.MaybeRunMember()
	goleak.VerifyTestMain(m)
}
