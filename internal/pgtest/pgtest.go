// Package pgtest gives tests a real PostgreSQL server.
//
// If the environment variable FENCELOCK_PG_DSN is set, tests use the server
// it names (the role needs CREATEDB). Otherwise a throwaway cluster is started
// from the machine's PostgreSQL binaries (/usr/lib/postgresql/*/bin, then
// PATH): initdb into a fresh temp dir, a random loopback port, fsync off, the
// socket inside the temp dir. PostgreSQL refuses to run as root, so under
// root the cluster runs as the "postgres" user.
//
// One server serves a whole test package:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		pool := pgtest.NewPool(t) // a fresh database, dropped when t ends
//		...
//	}
//
// Without binaries and without FENCELOCK_PG_DSN, tests that need the server
// are skipped, unless CI=true, where they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// EnvDSN names the environment variable that points tests at an existing
// server instead of a throwaway one.
const EnvDSN = "FENCELOCK_PG_DSN"

// startTimeout bounds starting a server, from initdb to accepting connections.
const startTimeout = 60 * time.Second

// ErrUnavailable means there is no server to test against: no PostgreSQL
// binaries were found and FENCELOCK_PG_DSN is not set.
var ErrUnavailable = errors.New("pgtest: no PostgreSQL server: install PostgreSQL " +
	"(apt-get install -y postgresql: initdb and postgres in /usr/lib/postgresql/*/bin or on PATH) " +
	"or set " + EnvDSN + " to a server's connection string")

// shared is the package's server, set by [M.Run].
var shared struct {
	mu  sync.Mutex
	srv *Server
	err error // why there is no server, when Main found none
	set bool
}

// Shared returns the server started by [Main], or nil outside of it (and
// when there is none). Examples, which have no *testing.T, use it.
func Shared() *Server {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.srv
}

// New returns the package's server started by [Main], or, without Main,
// starts one for t and stops it when t ends. When there is no server it
// skips t, or fails it when the environment variable CI is "true".
func New(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	srv, err, set := shared.srv, shared.err, shared.set
	shared.mu.Unlock()
	if set && srv != nil {
		return srv
	}
	if !set {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		srv, err = Start(ctx)
		if err == nil {
			t.Cleanup(func() { _ = srv.Close() })
			return srv
		}
	}
	unavailable(t, err)
	return nil
}

// unavailable skips or fails t for want of a server.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	testenv.Unavailable(t, err.Error(), "install PostgreSQL's server binaries (bash .ci/setup.sh) or set "+EnvDSN)
}

// Start returns a server: the one named by FENCELOCK_PG_DSN when set, else a
// throwaway cluster it starts. ctx bounds the start; when it ends, whatever
// was started is stopped and removed. The error matches [ErrUnavailable] when
// there is neither. The caller must call [Server.Close].
func Start(ctx context.Context) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return external(ctx, dsn)
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	return startCluster(ctx, bin)
}

// M wraps a *testing.M so that the package's server lives exactly as long as
// the tests. Create it with [Main].
type M struct{ m *testing.M }

// Main returns m wrapped for TestMain; its Run fits goleak.VerifyTestMain.
func Main(m *testing.M) *M { return &M{m: m} }

// Run starts the server, runs the tests, stops the server and returns the
// exit code. Without a server it prints why; under CI=true it then returns 1
// without running anything, otherwise it runs the tests (those that need
// the server skip) and leaves out the examples, which cannot skip.
func (w *M) Run() int {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	srv, err := Start(ctx)
	cancel()
	shared.mu.Lock()
	shared.srv, shared.err, shared.set = srv, err, true
	shared.mu.Unlock()
	if err != nil {
		return w.runWithout(err)
	}
	code := w.m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func (w *M) runWithout(err error) int {
	if !errors.Is(err, ErrUnavailable) || testenv.InCI() {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "%v\npgtest: skipping the tests that need it, and the examples\n", err)
	skipExamples()
	return w.m.Run()
}
