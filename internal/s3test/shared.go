package s3test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/fencelock/fencelock/internal/testenv"
)

// Shared is one server shared by all tests of a package, started before them
// and stopped after them by TestMain:
//
//	var s3srv s3test.Shared
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(s3srv.Wrap(m)) }
//
// The server is stopped before goleak looks for leaked goroutines. When no
// server is available, the package's tests (examples included, which cannot
// skip) are not run: Run prints why and how to get a server and reports
// success, or failure under CI=true.
//
// The zero Shared is ready to use.
type Shared struct {
	srv *Server
}

// Wrap returns a runner whose Run starts the server, runs m and stops the server.
func (sh *Shared) Wrap(m *testing.M) interface{ Run() int } {
	return sharedRunner{sh: sh, m: m}
}

// Server returns the shared server. It fails tb if called outside the tests
// that Wrap's Run runs.
func (sh *Shared) Server(tb testing.TB) *Server {
	tb.Helper()
	if sh.srv == nil {
		tb.Fatal("s3test: Shared.Server called without TestMain running Shared.Wrap(m)")
	}
	return sh.srv
}

// Current returns the shared server, or nil outside Wrap's Run; for examples,
// which have no testing.TB.
func (sh *Shared) Current() *Server { return sh.srv }

type sharedRunner struct {
	sh *Shared
	m  *testing.M
}

func (r sharedRunner) Run() int {
	dir, err := os.MkdirTemp("", "fencelock-s3test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	srv, err := Start(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, r.failMessage(err))
		if errors.Is(err, ErrUnavailable) && !testenv.InCI() {
			return 0
		}
		return 1
	}
	r.sh.srv = srv
	defer func() { r.sh.srv = nil }()
	code := r.m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func (r sharedRunner) failMessage(err error) string {
	if errors.Is(err, ErrUnavailable) && !testenv.InCI() {
		return skipMessage(err)
	}
	return "FAIL: " + err.Error()
}
