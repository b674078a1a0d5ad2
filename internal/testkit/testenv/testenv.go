// Package testenv holds the one rule for a test that cannot run on this
// machine (a server, a tool or a long run is missing): under CI=true it
// fails loudly, so a green CI never hides a test that did not run;
// elsewhere it skips and says how to enable it. [Long] is the one way a
// test joins the long tier, which go test -short skips.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Long marks tb as a test of the long tier: a property test, a fault storm,
// a multi-member cluster, other etcd versions, the fault harness, or any test
// that takes seconds of waiting. Under go test -short it skips, saying what
// it is and how to run it, so that -short is the fast loop; under CI=true it
// runs, -short or not, since CI runs everything. what says why it is long
// ("a property test: 200 random schedules").
func Long(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() && !InCI() {
		tb.Skipf("long tier, skipped under -short: %s (to run this test: go test without -short)", what)
	}
}

// InCI reports whether CI=true.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable fails tb under CI=true and skips it elsewhere, with why the
// test cannot run and how to enable it.
func Unavailable(tb testing.TB, why, howToEnable string) {
	tb.Helper()
	msg := fmt.Sprintf("%s (to run this test: %s)", why, howToEnable)
	if InCI() {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// NoServer handles err from getting a test server: it fails tb unless err
// matches unavailable (no server on this machine), in which case it is
// [Unavailable] with err's message and howToEnable.
func NoServer(tb testing.TB, err, unavailable error, howToEnable string) {
	tb.Helper()
	if !errors.Is(err, unavailable) {
		tb.Fatal(err)
	}
	Unavailable(tb, err.Error(), howToEnable)
}

// ArtifactDir returns the directory where tests leave files for a person
// to look at (a harness report, a screenshot), creating it:
// $FENCELOCK_ARTIFACTS, or fencelock-artifacts in the system's temporary
// directory. Unlike t.TempDir, it outlives the test; .ci/run sets it.
func ArtifactDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("FENCELOCK_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "fencelock-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}
