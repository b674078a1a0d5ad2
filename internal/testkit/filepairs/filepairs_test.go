package filepairs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/filepairs"
)

// maxEtcdlockPairs is etcdlock's budget: at most this many pairs of files
// that each use a name of the other (issue 48's goal was 12; it reached 4).
const maxEtcdlockPairs = 4

// TestEtcdlockPairs holds etcdlock's two-way pairs of files to their
// budget; go run ./internal/testkit/filepairs/pairs -v ./etcdlock lists them.
func TestEtcdlockPairs(t *testing.T) {
	g, err := filepairs.Load("github.com/fencelock/fencelock/etcdlock")
	if err != nil {
		t.Fatal(err)
	}
	ps := g.Pairs()
	for _, p := range ps {
		t.Logf("%s <-> %s: %v / %v", p.A, p.B, p.AtoB, p.BtoA)
	}
	if len(ps) > maxEtcdlockPairs {
		t.Errorf("etcdlock has %d two-way pairs of files, more than its budget of %d (listed above)", len(ps), maxEtcdlockPairs)
	}
}

// The files of etcdlock's engine (the queue protocol: sessions, lanes and
// markers, tickets, acquire, wait, release, the Lock and its key watch, the
// watch stream and the follower), and the vocabulary under it (errors, records, keys,
// options, the table of kinds, and the engine's contracts with a kind,
// secondkey.go, and with its observer, engine_observer.go). Every other
// file is above: the kinds, the read side, telemetry.
var (
	engineFiles = []string{"session.go", "lanes.go", "marker.go", "ticket.go", "acquire.go", "wait.go",
		"release.go", "lock.go", "lockwatch.go", "client.go", "watch.go", "watchstream.go", "watchbox.go",
		"watchrefresh.go", "follow.go"}
	vocabularyFiles = []string{"errors.go", "record.go", "keys.go", "name.go", "options.go", "backoff.go",
		"clock.go", "clock_linux.go", "clock_other.go", "keepalive.go", "conn.go", "kinds.go",
		"secondkey.go", "engine_observer.go"}
	telemetryFiles = []string{"telemetry.go", "telemetry_calls.go"}
)

// TestEtcdlockLayers holds the direction of etcdlock's files: the engine
// uses only itself and the vocabulary (it names no kind's file, no read
// side's, and tells telemetry only through engineObserver; client.go alone
// makes the telemetry that is its observer), and telemetry uses only the
// vocabulary (the observer's events, the kinds' table), never the engine's
// own files.
func TestEtcdlockLayers(t *testing.T) {
	g, err := filepairs.Load("github.com/fencelock/fencelock/etcdlock")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range layerViolations(g) {
		t.Error(v)
	}
	for _, f := range slices.Concat(engineFiles, vocabularyFiles, telemetryFiles) {
		if _, err := os.Stat(filepath.Join("..", "..", "..", "etcdlock", f)); err != nil {
			t.Errorf("%s is listed as a layer's file: %v", f, err)
		}
	}
}

// TestLayersControl is TestEtcdlockLayers's control: an engine file that
// names a kind's file, and a telemetry file that reads a Lock, are found.
func TestLayersControl(t *testing.T) {
	g := filepairs.Graph{
		"acquire.go":         {"semaphore.go": {"permit"}, "ticket.go": {"spot"}},
		"telemetry_calls.go": {"lock.go": {"token"}, "engine_observer.go": {"lockEvent"}},
	}
	if got := layerViolations(g); len(got) != 2 {
		t.Errorf("got %d violations %q, want 2 (acquire.go -> semaphore.go, telemetry_calls.go -> lock.go)", len(got), got)
	}
}

// layerViolations lists the arrows of g that run against etcdlock's layers.
func layerViolations(g filepairs.Graph) []string {
	in := func(set []string, f string) bool { return slices.Contains(set, f) }
	var out []string
	for from, tos := range g {
		for to, names := range tos {
			switch {
			case in(engineFiles, from) && !in(engineFiles, to) && !in(vocabularyFiles, to) &&
				!(from == "client.go" && to == "telemetry.go"):
				out = append(out, fmt.Sprintf("engine file %s uses %v of %s, above the engine", from, names, to))
			case in(telemetryFiles, from) && in(engineFiles, to):
				out = append(out, fmt.Sprintf("telemetry file %s uses %v of the engine's %s (it should get them in an event, engine_observer.go)", from, names, to))
			}
		}
	}
	return out
}

// TestCounts is the control: a package with one two-way pair (a.go and
// b.go) and a one-way use (c.go of b.go) counts one pair, and a field
// counts as a use of the file that declares it.
func TestCounts(t *testing.T) {
	g, err := filepairs.Load("./testdata/cycle")
	if err != nil {
		t.Fatal(err)
	}
	ps := g.Pairs()
	if len(ps) != 1 || ps[0].A != "a.go" || ps[0].B != "b.go" {
		t.Fatalf("pairs = %+v, want a.go <-> b.go only", ps)
	}
	if got := g["c.go"]["b.go"]; len(got) != 2 || got[0] != "f" || got[1] != "t" {
		t.Errorf("c.go uses of b.go = %v, want [f t]", got)
	}
	if g.Arrows() != 3 {
		t.Errorf("arrows = %d, want 3 (a->b, b->a, c->b)", g.Arrows())
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
