// Command fencecheck runs fencelock's fault harness: worker processes take
// etcd locks and write to PostgreSQL, S3, the run's etcd cluster and a
// SQLite file with their fencing tokens while a nemesis pauses, kills and
// partitions them and crashes (SIGKILL) and restarts etcd member
// processes; a checker then reads what the storage accepted and counts stale writes
// that landed. It runs the workload fenced, then again with fencing off
// (the control), with the same seed, and prints a summary table and the
// lock and write metrics the workers reported through OpenTelemetry.
//
//	go run ./cmd/fencecheck                 # short, the CI mode: each run until its minimums, at most 8 minutes
//	go run ./cmd/fencecheck -long           # a soak of 5 to 15 minutes per run
//	go run ./cmd/fencecheck -seed 42        # replay a seed
//	go run ./cmd/fencecheck -control=false  # the fenced run only
//	go run ./cmd/fencecheck -election       # workers are election candidates (Client.Run), not lock holders
//	go run ./cmd/fencecheck -kind bank      # Jepsen's bank: transfers between accounts under LockAll (-long too)
//	go run ./cmd/fencecheck -kind effects   # the outbox: transfers record effects, dispatchers deliver them to HTTP and JetStream (-long too)
//	go run ./cmd/fencecheck -kind bank -liveness  # and the bank's liveness control: without preemption it must stall
//	go run ./cmd/fencecheck -kind bank -freeze 2  # one fenced pause in two freezes its holder 5 s
//	go run ./cmd/fencecheck -report r.html  # also draw both runs' histories as one HTML page
//
// It starts PostgreSQL and versitygw itself (and, for -kind effects, each
// run starts a nats-server), as the tests do (bash
// .ci/setup.sh installs them), or uses FENCELOCK_PG_DSN and
// FENCELOCK_S3_* when set. It exits 1 when the fenced run has a violation
// or the control run has none; then, without -report, it writes the HTML
// report to a file in the temporary directory and prints its path.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

func main() {
	// This executable, re-executed by harness.Run, is also its workers and
	// its etcd members.
	harness.MaybeRunWorker()
	embedetcd.MaybeRunMember()
	long := flag.Bool("long", false, "soak mode: more workers and faults, fewer keys, 5 to 15 minutes per run")
	seed := flag.Int64("seed", 0, "random seed (default: from the clock, printed)")
	control := flag.Bool("control", true, "also run the control: the same workload and seed with fencing off")
	events := flag.String("events", "", "write every event of the fenced run (the workers', and the nemesis's faults) as JSON lines to this file")
	election := flag.Bool("election", false, "workers lead elections with etcdlock's Client.Run, writing with their terms' tokens, instead of taking locks")
	kind := flag.String("kind", "", `the kind of lock the workers take: "" (a mutex), "semaphore" (a permit per key, each resource fenced by its slot's tokens) "rw" (writers fence, readers only read) or "group" (members of one group whose partitions are the keys, each resource fenced by its partition's tokens); or "bank" (transfers between two accounts under LockAll, in PostgreSQL, etcd and S3); or "effects" (transfers in PostgreSQL recording effects in its outbox, delivered by dispatchers to an HTTP receiver and a JetStream stream; needs nats-server); not with -election`)
	report := flag.String("report", "", "write the HTML report of the runs to this file: each write at its token and time, the lock holds, the faults and the violations, fenced and control side by side (default: to a temporary file when the verdict fails)")
	liveness := flag.Bool("liveness", false, "with -kind bank: also run the liveness control, the fenced bank run built without preemption (the library before issue 47) with its holders frozen 5 s, which must show a stall past the liveness bound and no safety violation")
	freeze := flag.Int("freeze", 0, "make one pause in N of the fenced run a freeze of three leases and 2 s (5 s), instead of the lease and up to 1.2 s more: long enough that a next holder waiting for the frozen one stalls past the liveness bound (default: one in 2 for -kind bank, none for the others)")
	allStores := flag.Bool("all-stores", false, "write every resource kind, JetStream's and Azure's too (needs nats-server and Azurite), as -long does; the short mode leaves those two out (harness.ShortResKinds)")
	faults := flag.Int("faults", 0, "faults of each kind the run goes on until (default: the mode's); the verdict still wants the short mode's minimums")
	flag.Parse()
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000
	}
	cfg := harness.Short(*seed)
	if *long {
		cfg = harness.Long(*seed)
	}
	cfg.Election = *election
	if *allStores {
		cfg.ResKinds = check.ResKinds
	}
	cfg.SetKind(*kind)
	if *faults > 0 {
		cfg.Until.Faults = harness.FaultsEach(*faults)
		cfg.MinDuration = min(cfg.MinDuration, 10*time.Second)
	}
	if *events != "" {
		f, err := os.Create(*events)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fencecheck:", err)
			os.Exit(2)
		}
		defer f.Close()
		cfg.Events = f
	}
	if *freeze > 0 {
		cfg.SetFreezes(*freeze)
	}
	if *liveness && *kind != harness.KindBank {
		fmt.Fprintln(os.Stderr, "fencecheck: -liveness is for -kind bank")
		os.Exit(2)
	}
	cfg.Log = func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }
	ok, err := run(cfg, *control, *liveness, *report)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencecheck:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run runs the fenced run and the control, and the liveness control if
// asked, and reports whether all came out as they must.
func run(cfg harness.Config, control, liveness bool, report string) (bool, error) {
	srv, stop, err := startServers()
	if err != nil {
		return false, err
	}
	defer stop()
	fmt.Printf("fencecheck: seed %d (replay with -seed %d)\n", cfg.Seed, cfg.Seed)
	fenced, err := runOne(srv, cfg, true)
	if err != nil {
		return false, err
	}
	var ctl *check.Report
	cfg.Events = nil
	if control {
		if ctl, err = runOne(srv, cfg, false); err != nil {
			return false, err
		}
	}
	fmt.Println()
	check.PrintSummary(os.Stdout, fenced, ctl)
	ok := verdict(fenced, ctl)
	runs := []*check.Report{fenced, ctl}
	if liveness {
		lc, lok, err := livenessControl(srv, cfg)
		if err != nil {
			return false, err
		}
		ok = ok && lok
		runs = append(runs, lc)
	}
	if report == "" && !ok {
		report = filepath.Join(os.TempDir(), fmt.Sprintf("fencecheck-seed%d.html", cfg.Seed))
	}
	if report != "" {
		if err := writeReport(report, runs...); err != nil {
			return false, err
		}
		fmt.Println("report:", report)
		fmt.Println("  open it in a browser: xdg-open FILE, or as root chromium --no-sandbox FILE (docs/harness.md)")
	}
	return ok, nil
}

// writeReport writes the HTML report of the runs to path.
func writeReport(path string, runs ...*check.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = check.WriteHTML(f, runs...)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// livenessControl runs the bank's liveness control (harness.LivenessControl,
// capped at two minutes) and prints and returns whether it showed a stall
// past its bound and no safety violation.
func livenessControl(srv harness.Servers, cfg harness.Config) (*check.Report, bool, error) {
	fmt.Printf("\n== liveness control: fenced, without preemption\n")
	rep, err := harness.Run(context.Background(), srv, harness.LivenessControl(cfg, 2*time.Minute))
	if err != nil {
		return nil, false, err
	}
	check.PrintViolations(os.Stdout, rep, 10)
	check.PrintSummary(os.Stdout, rep, nil)
	why := check.LivenessVerdict(rep)
	for _, w := range why {
		fmt.Println("FAIL:", w)
	}
	if len(why) == 0 {
		fmt.Println("PASS: the liveness control stalled past the bound, and kept its safety")
	}
	return rep, len(why) == 0, nil
}

func runOne(srv harness.Servers, cfg harness.Config, fenced bool) (*check.Report, error) {
	cfg.Fenced = fenced
	name := map[bool]string{true: "fenced", false: "control (fencing off)"}[fenced]
	fmt.Printf("\n== %s run\n", name)
	rep, err := harness.Run(context.Background(), srv, cfg)
	if err != nil {
		return nil, err
	}
	check.PrintViolations(os.Stdout, rep, 10)
	check.PrintSummary(os.Stdout, rep, nil)
	check.PrintMetrics(os.Stdout, rep)
	return rep, nil
}

// verdict prints and returns whether the fenced run is clean and
// exercised enough to mean something, and the control, if run, caught a
// stale write landing.
func verdict(fenced, control *check.Report) bool {
	why := check.Verdict(fenced, control, harness.MinimumsOf(fenced.Kind))
	for _, w := range why {
		fmt.Println("FAIL:", w)
	}
	if len(why) == 0 {
		fmt.Println("PASS")
	}
	return len(why) == 0
}
