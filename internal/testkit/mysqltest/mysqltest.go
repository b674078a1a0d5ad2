// Package mysqltest gives tests a real MySQL-protocol server: MariaDB, from
// Debian's mariadb-server package.
//
// If the environment variable FENCELOCK_MYSQL_DSN is set (a
// go-sql-driver/mysql DSN, such as "root:pw@tcp(127.0.0.1:3306)/"), tests
// use the server it names (the user needs CREATE and DROP on databases).
// Otherwise a throwaway server is started from the machine's binaries
// (mariadb-install-db or mysql_install_db, then mariadbd or mysqld, from
// /usr/sbin, /usr/bin or PATH): a fresh temp dir for data and socket, a
// random loopback port, grant tables skipped (anyone on loopback is
// superuser), durability off. mariadbd refuses to run as root unless told
// to, so under root it is started with --user=root.
//
// One server serves a whole test package:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(mysqltest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		db := mysqltest.NewDB(t) // a fresh database, dropped when t ends
//		...
//	}
//
// Without binaries and without FENCELOCK_MYSQL_DSN, tests that need the
// server are skipped, unless CI=true, where they fail.
package mysqltest

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
const EnvDSN = "FENCELOCK_MYSQL_DSN"

// startTimeout bounds starting a server, from install-db to accepting
// connections.
const startTimeout = 90 * time.Second

// howToEnable says how to get a server, in skip messages.
const howToEnable = "install MariaDB's server (bash .ci/setup.sh, or apt-get install -y mariadb-server) or set " + EnvDSN

// ErrUnavailable means there is no server to test against: no MariaDB or
// MySQL binaries were found and FENCELOCK_MYSQL_DSN is not set.
var ErrUnavailable = errors.New("mysqltest: no MySQL or MariaDB server: install one " +
	"(apt-get install -y mariadb-server: mariadb-install-db and mariadbd) or set " + EnvDSN + " to a server's DSN")

// shared is the package's server, set by [Main]'s Run.
var shared = &testenv.Shared[*Server]{
	Name: "mysqltest", Start: Start, Timeout: startTimeout, Unavailable: ErrUnavailable, HowToEnable: howToEnable,
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

// Start returns a server: the one named by FENCELOCK_MYSQL_DSN when set,
// else a throwaway one it starts. ctx bounds the start; when it ends,
// whatever was started is stopped and removed. The error matches
// [ErrUnavailable] when there is neither. The caller must call
// [Server.Close].
func Start(ctx context.Context) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return external(ctx, dsn)
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	return startServer(ctx, bin, false)
}

// NewWithGrants returns, for a test of what a user lacking a privilege
// gets, a server whose grant tables are in force (the package's shared
// server skips them): the one named by FENCELOCK_MYSQL_DSN when set, else
// a throwaway one started for t alone, stopped when t ends, whose
// [Server.Config] connects as root over its Unix socket (other users
// created as 'user'@'localhost' connect the same way). Without a server
// it skips t, or fails it when CI is "true".
func NewWithGrants(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	var s *Server
	var err error
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		s, err = external(ctx, dsn)
	} else if bin, berr := findBinaries(); berr != nil {
		err = berr
	} else {
		s, err = startServer(ctx, bin, true)
	}
	if err != nil {
		testenv.NoServer(t, err, ErrUnavailable, howToEnable)
		return nil
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Main returns m wrapped for TestMain, as pgtest.Main does: one server for
// the package's tests, stopped before goleak looks for leaked goroutines.
// See [testenv.Main] for what happens without a server.
func Main(m testenv.Runner) testenv.Main {
	return shared.Main(m)
}
