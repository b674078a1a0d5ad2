package embedetcd_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// TestMain lets this test binary, re-executed by the clusters of the tests,
// be their members.
func TestMain(m *testing.M) {
	embedetcd.MaybeRunMember()
	goleak.VerifyTestMain(m)
}
