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
	"os"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
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

// shared is the package's server, set by [Main]'s Run.
var shared = &testenv.Shared[*Server]{
	Name: "pgtest", Start: Start, Timeout: startTimeout, Unavailable: ErrUnavailable,
	HowToEnable: "install PostgreSQL's server binaries (bash .ci/setup.sh) or set " + EnvDSN,
}

// Shared returns the server started by [Main], or nil outside of it (and
// when there is none). Examples, which have no *testing.T, use it.
func Shared() *Server {
	return shared.Get()
}

// New returns the package's server started by [Main], or, without Main,
// starts one for t and stops it when t ends. When there is no server it
// skips t, or fails it when the environment variable CI is "true".
func New(t testing.TB) *Server {
	t.Helper()
	return shared.New(t)
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

// Main returns m wrapped for TestMain, so that the package's server lives
// exactly as long as the tests: its Run starts one server that every test
// of the package shares ([New] and [Shared] return it), runs the tests,
// stops the server before goleak looks for leaked goroutines, and fits
// goleak.VerifyTestMain. See [testenv.Main] for what happens without a
// server.
func Main(m testenv.Runner) testenv.Main {
	return shared.Main(m)
}
