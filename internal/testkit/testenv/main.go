package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Main is the one TestMain shape for a package whose tests share a server
// (PostgreSQL, S3): wrap m, and pass the result to goleak.VerifyTestMain,
// which calls Run.
type Main struct {
	// M is the tests: a *testing.M, or another Main, so that one package's
	// tests can share two servers (pgtest.Main(mysqltest.Main(m))).
	M Runner
	// Name names the server in messages ("pgtest", "s3test", "embedetcd").
	Name string
	// Start starts the server; an error matching Unavailable means there is
	// none on this machine.
	Start       func(ctx context.Context) (io.Closer, error)
	Unavailable error
	HowToEnable string
	// Set is called before the tests run with the server, or with nil and
	// why there is none; and with nil, nil after them.
	Set func(srv io.Closer, err error)
}

// Runner runs a package's tests and returns the exit code: *testing.M
// and [Main] are both one.
type Runner interface{ Run() int }

// startTimeout bounds Start.
const startTimeout = 2 * time.Minute

// Run starts the server, runs the tests, stops the server (before goleak
// looks for leaked goroutines) and returns the exit code. Without the
// server: under CI=true it prints why and returns 1 without running
// anything; elsewhere it prints why and how to get one, runs the tests
// (those that need the server skip, through [Unavailable]) and leaves out
// the examples, which cannot skip.
//
// A fuzz worker (the processes go test -fuzz starts, each running only the
// fuzz target) starts no server: each worker would start its own beside
// the coordinator's, which took most of the fuzzing time, and a worker
// whose start failed died before fuzzing, failing the target with only
// "fuzzing process terminated without fuzzing: EOF" (CI, FuzzQuoteName in
// fence/sql, whose workers each started PostgreSQL and MariaDB).
func (w Main) Run() int {
	if fuzzWorker() {
		return w.M.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	srv, err := w.Start(ctx)
	cancel()
	w.Set(srv, err)
	defer w.Set(nil, nil)
	if err != nil {
		if !errors.Is(err, w.Unavailable) || InCI() {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "%v\n%s: skipping the tests that need it, and the examples (to run them: %s)\n", err, w.Name, w.HowToEnable)
		skipExamples()
		return w.M.Run()
	}
	code := w.M.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stopping the server: %v\n", w.Name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// fuzzWorker reports whether this process is a fuzz worker.
func fuzzWorker() bool { return testFlag("test.fuzzworker") == "true" }

// Benchmarking reports whether -test.bench asks this test binary for
// benchmarks.
func Benchmarking() bool { return testFlag("test.bench") != "" }

// testFlag returns the value of go test's flag name ("test.bench"),
// parsing the command line first if no one has.
func testFlag(name string) string {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// skipExamples leaves the examples out of the run, unless -test.skip was
// given.
func skipExamples() {
	if flag.Lookup("test.skip") != nil && testFlag("test.skip") == "" {
		_ = flag.Set("test.skip", "^Example")
	}
}
