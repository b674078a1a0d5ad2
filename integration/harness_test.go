package integration_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A harness worker, or one of a harness run's etcd members, is this test
// binary re-executed with harness.WorkerEnv or embedetcd.MemberEnv set; it
// runs from init, before any test or server starts.
func init() {
	harness.MaybeRunWorker()
	embedetcd.MaybeRunMember()
}

// TestHarnessShort runs the fault harness's short mode (what go run
// ./cmd/fencecheck runs): worker processes lock and write to PostgreSQL,
// S3, etcd and SQLite while the nemesis pauses, kills and partitions them, crashes
// (SIGKILL) and restarts etcd member processes, and replaces members
// through etcd's membership API. Each run goes on until it
// reaches harness.ShortMinimums: about a minute on a loaded 2-core machine,
// so about two minutes for the pair (each is capped; see runHarness).
// Fenced, the checker must find no violation; with fencing off and the same
// seed (the control), it must find a stale write landing on every kind of
// resource. FENCECHECK_SEED replays a seed; go
// test -short skips the test outside CI.
func TestHarnessShort(t *testing.T) {
	if testing.Short() && !testenv.InCI() { // CI runs it, -short or not
		testenv.Unavailable(t, "the fault harness takes about two minutes and -short is set", "run without -short")
	}
	harnessPair(t, nil, 8) // then the six runs of the tests below
}

// TestHarnessShortElection is TestHarnessShort with the workers as
// election candidates: each leads a key's election with Client.Run and
// writes with its term's token (go run ./cmd/fencecheck -election).
func TestHarnessShortElection(t *testing.T) {
	if testing.Short() && !testenv.InCI() {
		testenv.Unavailable(t, "the fault harness takes about two minutes and -short is set", "run without -short")
	}
	harnessPair(t, func(c *harness.Config) { c.Election = true }, 6)
}

// TestHarnessShortSemaphore is TestHarnessShort with the workers taking a
// permit of one semaphore with a permit per key, each writing its slot's
// key with its token: a resource is fenced by one slot's tokens.
func TestHarnessShortSemaphore(t *testing.T) {
	if testing.Short() && !testenv.InCI() {
		testenv.Unavailable(t, "the fault harness takes about two minutes and -short is set", "run without -short")
	}
	harnessPair(t, func(c *harness.Config) { c.Kind = harness.KindSemaphore }, 4)
}

// TestHarnessShortRW is TestHarnessShort with read/write locks: half the
// sections a writer, writing with its token, half a reader, reading only;
// the resources are fenced by the writers' tokens.
func TestHarnessShortRW(t *testing.T) {
	if testing.Short() && !testenv.InCI() {
		testenv.Unavailable(t, "the fault harness takes about two minutes and -short is set", "run without -short")
	}
	harnessPair(t, func(c *harness.Config) { c.Kind = harness.KindRW }, 2)
}

// harnessPair runs the fenced run and its control and checks the verdict;
// runsLeft counts them and the harness runs of the tests after this one.
// set, when not nil, adapts the short preset (the workers' kind of lock).
func harnessPair(t *testing.T, set func(*harness.Config), runsLeft int) {
	t.Helper()
	srv := harnessServers(t)
	seed := harnessSeed(t)
	t.Logf("seed %d (replay: FENCECHECK_SEED=%d)", seed, seed)
	fenced := runHarness(t, srv, seed, set, true, runsLeft)
	control := runHarness(t, srv, seed, set, false, runsLeft-1)
	var table strings.Builder
	check.PrintSummary(&table, fenced, control)
	t.Logf("seed %d\n%s", seed, table.String())

	for _, why := range check.Verdict(fenced, control, harness.ShortMinimums) {
		t.Error(why)
	}
}

func harnessServers(t *testing.T) harness.Servers {
	t.Helper()
	dsn := pgtest.New(t).NewDatabase(t)
	s3srv := s3test.New(t)
	cfg := s3srv.Config
	cfg.Bucket = s3srv.VersionedBucket(t)
	return harness.Servers{PostgresDSN: dsn, S3: cfg}
}

func harnessSeed(t *testing.T) int64 {
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

// runHarness runs one of the runsLeft runs still to come, capped so that
// all of them end before the test's deadline: a run cut short by the test
// timeout would panic instead of saying which minimums it missed.
func runHarness(t *testing.T, srv harness.Servers, seed int64, set func(*harness.Config), fenced bool, runsLeft int) *check.Report {
	t.Helper()
	cfg := harness.Short(seed)
	if set != nil {
		set(&cfg)
	}
	cfg.Fenced = fenced
	if dl, ok := t.Deadline(); ok {
		const wrapUp = 45 * time.Second // stopping the workers and checking, per run
		if left := time.Until(dl)/time.Duration(runsLeft) - wrapUp; left < cfg.MaxDuration {
			cfg.MaxDuration = max(left, cfg.MinDuration)
			t.Logf("run capped at %v by the test's deadline (go test -timeout 20m lifts this)", cfg.MaxDuration.Round(time.Second))
		}
	}
	start := time.Now()
	rep, err := harness.Run(t.Context(), srv, cfg)
	if err != nil {
		t.Fatalf("harness run (fenced %v, seed %d): %v", fenced, seed, err)
	}
	var out strings.Builder
	check.PrintViolations(&out, rep, 10)
	t.Logf("fenced %v: %v, faults %v, capped: %v\n%s", fenced, time.Since(start).Round(time.Second), rep.Faults, rep.Capped > 0, out.String())
	return rep
}
