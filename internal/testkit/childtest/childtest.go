// Package childtest re-runs the current test in a child process, for a
// control test whose expected result is a failure: the child runs the check
// against the broken subject and must fail, the parent reads its output.
// [Rerun] runs the test binary again with other flags and environment (a
// package's tests against a second server).
//
//	func TestSuiteCatchesBrokenStore(t *testing.T) {
//		if childtest.InChild() {
//			suite.Run(t, broken) // must fail
//			return
//		}
//		out := childtest.FailingOutput(t)
//		// check out says why
//	}
package childtest

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// env marks the child process.
const env = "FENCELOCK_CHILD_TEST"

// InChild reports whether this process is the child FailingOutput started.
func InChild() bool { return os.Getenv(env) == "1" }

// FailingOutput re-runs the test t (only it) in a child process, where
// InChild is true, and returns the child's verbose output. It fails t if the
// child passed.
func FailingOutput(t *testing.T) string {
	t.Helper()
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("%s passed in the child process, where it must fail:\n%s", t.Name(), out)
	}
	return string(out)
}

// Rerun runs this test binary again with args (go test's flags, as
// -test.run=...) and env added to this process's environment, and returns
// its combined output and its error (nil when every test passed). ctx
// bounds it.
func Rerun(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
