//go:build moto

// The moto controls of the contention tests: moto's server checks the ETag
// and stores the body in separate steps, and the checks must catch it. CI
// cannot install moto (no PyPI, no Debian package), so these are built only
// with -tags moto:
//
//	FENCELOCK_MOTO_SERVER=$(command -v moto_server) go test -tags moto -run Moto ./fence/s3/

package s3fence_test

import (
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/childtest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestContentionCatchesMoto: RunContention against moto must fail its
// checks: a stale write lands, or a read finds the object half-stored (moto
// then answers a ranged GET with 416, and the read reports a foreign
// object). It runs in a child process, where the failure is the expected
// result.
func TestContentionCatchesMoto(t *testing.T) {
	if childtest.InChild() {
		fencetest.RunContention(t, contentionStores(s3test.NewMoto(t)), fencetest.WithRounds(12))
		return
	}
	s3test.NewMoto(t) // fails unless moto is enabled
	out := childtest.FailingOutput(t)
	if !strings.Contains(out, "rounds failed") && !strings.Contains(out, "observer:") {
		t.Fatalf("RunContention failed on moto, but not in its checks:\n%s", out)
	}
	t.Logf("moto, as expected:\n%s", lines(out, "round", "observer"))
}

// TestConditionalPutAtomicMoto is TestConditionalPutAtomic's control.
func TestConditionalPutAtomicMoto(t *testing.T) {
	if conditionalPutRounds(t, s3test.NewMoto(t)) == 0 {
		t.Fatalf("control: every round of %d had one PUT succeed on moto; the test cannot tell an atomic server from moto", putRounds)
	}
}

// lines returns the lines of out that contain any of subs.
func lines(out string, subs ...string) string {
	var b strings.Builder
	for l := range strings.Lines(out) {
		for _, s := range subs {
			if strings.Contains(l, s) {
				b.WriteString(l)
				break
			}
		}
	}
	return b.String()
}
