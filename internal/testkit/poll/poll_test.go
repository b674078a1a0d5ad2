package poll_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/childtest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Until returns once cond holds, after as many checks as it takes.
func TestUntilReturnsOnceTrue(t *testing.T) {
	calls := 0
	poll.Until(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("calls: got %d, want 3", calls)
	}
}

// Until fails the test when cond never holds (run in a child process,
// where the failure is the expected result), naming what it waited for.
// (Until itself waits poll.Timeout, 10 s; the child gives up after 50 ms.)
func TestUntilFailsOnTimeout(t *testing.T) {
	if childtest.InChild() {
		poll.UntilWithin(t, "a condition that never holds", func() bool { return false }, 50*time.Millisecond)
		return
	}
	out := childtest.FailingOutput(t)
	if want := "waiting for a condition that never holds: not so after 50ms"; !strings.Contains(out, want) {
		t.Fatalf("child output: got %q, want it to contain %q", out, want)
	}
}
