// Package harnesstest runs the fault harness's short mode from a test: a
// fenced run and its control with the same seed, and the verdict on the
// pair. The packages under integration/harness use it, one package a kind
// of lock, so that each pair has a test binary, and so go test's default
// timeout (10 minutes), to itself.
package harnesstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/browser"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Init makes this test binary a harness worker or one of a run's etcd
// members when it was re-executed as one; the test package calls it from
// init, before any test or server starts.
func Init() {
	harness.MaybeRunWorker()
	embedetcd.MaybeRunMember()
}

// wrapUp is what a run needs after its cap to stop the workers and check.
const wrapUp = 45 * time.Second

// Pair runs the fenced run and its control with one seed and checks the
// verdict (FENCECHECK_SEED replays a seed), against the minimums of the
// run's Kind (harness.MinimumsOf). set, when not nil, adapts the short
// preset. Each run goes on until it reaches those minimums, and is capped
// so that it ends before the test's deadline; the two run at once. A run
// that hits its cap fails the verdict and says so.
func Pair(t *testing.T, srv harness.Servers, set func(*harness.Config)) {
	t.Helper()
	seed := Seed(t)
	t.Logf("seed %d (replay: FENCECHECK_SEED=%d)", seed, seed)
	cfg := harness.Short(seed)
	if set != nil {
		set(&cfg)
	}
	// The two runs share nothing but the servers (each has its own etcd
	// cluster, redis-server, workers and names), and wait on timers far
	// more than they compute, so they run side by side: a pair takes the
	// longer run's time, not both.
	var fenced, control *check.Report
	var errs [2]error
	var wg sync.WaitGroup
	wg.Go(func() { fenced, errs[0] = run(t, srv, cfg, true) })
	wg.Go(func() { control, errs[1] = run(t, srv, cfg, false) })
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	check.PrintSummary(&table, fenced, control)
	t.Logf("seed %d\n%s", seed, table.String())
	for _, why := range check.Verdict(fenced, control, harness.MinimumsOf(cfg.Kind)) {
		t.Error(why)
	}
	Report(t, "harness-"+kindName(cfg), fenced, control)
}

// livenessCap caps the bank's liveness control: it usually shows its stall
// within its first few freezes (5 s each).
const livenessCap = 2 * time.Minute

// LivenessControl runs the bank's liveness control
// ([harness.LivenessControl]: the fenced bank run with PostgreSQL's
// writes built WithoutPreemption, pausing only, every pause a freeze)
// with FENCECHECK_SEED or a new seed, and checks that it shows a stall
// past its bound and no safety violation ([check.LivenessVerdict]). Its
// report is name.html, as [Report] writes it.
func LivenessControl(t *testing.T, srv harness.Servers, name string) {
	t.Helper()
	seed := Seed(t)
	t.Logf("seed %d (replay: FENCECHECK_SEED=%d)", seed, seed)
	cfg := harness.Short(seed)
	cfg.SetKind(harness.KindBank)
	cfg = harness.LivenessControl(cfg, livenessCap)
	rep, err := run(t, srv, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	check.PrintSummary(&table, rep, nil)
	t.Logf("seed %d\n%s", seed, table.String())
	for _, why := range check.LivenessVerdict(rep) {
		t.Error(why)
	}
	Report(t, name, rep)
}

func kindName(cfg harness.Config) string {
	switch {
	case cfg.Election:
		return "election"
	case cfg.Kind != "":
		return cfg.Kind
	}
	return "lock"
}

// Report writes the HTML report of runs (check.WriteHTML) to name.html in
// the artifacts directory (testenv.ArtifactDir), opens it in headless
// Chromium, and checks that it renders without a script error and draws
// what the runs' histories hold, keeping its screenshot beside it as
// name.png. A failed test's report is named by its seed too, so that the
// next run does not overwrite it; the test's log says where it is.
// Without Chromium, the report is written and the check fails under
// CI=true; elsewhere it is left out, saying so, and the test keeps its
// verdict (a skip would hide it).
func Report(t *testing.T, name string, runs ...*check.Report) {
	t.Helper()
	if t.Failed() && len(runs) > 0 {
		name = fmt.Sprintf("%s-seed%d-failed", name, runs[0].Seed)
	}
	path := filepath.Join(testenv.ArtifactDir(t), name+".html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = check.WriteHTML(f, runs...)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("writing the report: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %s (%d bytes, written in %v); open it in a browser", path, st.Size(), time.Since(start).Round(time.Millisecond))
	chromium, err := browser.Find()
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("the report was not opened in a browser: %v (%s)", err, browser.HowToEnable)
		}
		t.Logf("the report was not opened in a browser: %v (to check it: %s)", err, browser.HowToEnable)
		return
	}
	frag := ""
	for _, r := range runs {
		if !r.Fenced && len(r.Violations) > 0 {
			frag = "control=0"
		}
	}
	shot := strings.TrimSuffix(path, ".html") + ".png"
	page, err := browser.Open(t.Context(), chromium, path, frag, shot, 1600, 1200)
	if err != nil {
		t.Fatalf("opening the report in Chromium: %v", err)
	}
	for _, p := range check.Rendered(page.DOM, page.Console, runs...) {
		t.Errorf("report %s: %s", path, p)
	}
}

// Servers starts the PostgreSQL and S3 servers a run writes to, for t.
func Servers(t *testing.T) harness.Servers {
	t.Helper()
	dsn := pgtest.New(t).NewDatabase(t)
	s3srv := s3test.New(t)
	cfg := s3srv.Config
	cfg.Bucket = s3srv.VersionedBucket(t)
	return harness.Servers{PostgresDSN: dsn, S3: cfg}
}

// Seed is FENCECHECK_SEED, or a new seed.
func Seed(t *testing.T) int64 {
	t.Helper()
	if s := os.Getenv("FENCECHECK_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("FENCECHECK_SEED: %v", err)
		}
		return seed
	}
	return time.Now().UnixNano() % 1_000_000
}

// run runs one run, capped so that it ends before the test's deadline: a
// run cut short by the test timeout would panic instead of saying which
// minimums it missed. It may run on a goroutine of its own, so it returns
// its failure rather than ending the test.
func run(t *testing.T, srv harness.Servers, cfg harness.Config, fenced bool) (*check.Report, error) {
	t.Helper()
	cfg.Fenced = fenced
	cfg.Log = t.Logf
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - wrapUp; left < cfg.MaxDuration {
			cfg.MaxDuration = max(left, cfg.MinDuration)
			t.Logf("run capped at %v by the test's deadline", cfg.MaxDuration.Round(time.Second))
		}
	}
	start := time.Now()
	rep, err := harness.Run(t.Context(), srv, cfg)
	if err != nil {
		return nil, fmt.Errorf("harness run (fenced %v, seed %d): %w", fenced, cfg.Seed, err)
	}
	var out strings.Builder
	check.PrintViolations(&out, rep, 10)
	t.Logf("fenced %v: %v, faults %v, capped: %v\n%s", fenced, time.Since(start).Round(time.Second), rep.Faults, rep.Capped > 0, out.String())
	return rep, nil
}
