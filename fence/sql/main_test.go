package sqlfence_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// The package's tests share one MariaDB and one PostgreSQL server; SQLite
// needs none.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(mysqltest.Main(m))) }

// server is one of the three databases every test of the dialects runs
// against.
type server struct {
	name string
	d    sqlfence.Dialect
	open func(t testing.TB) *sql.DB // a fresh, empty database
}

// servers[0] is MariaDB with the driver's defaults; "MariaDB found rows"
// is the same server with clientFoundRows=true, which changes what
// MySQL's affected-rows counts mean.
var servers = []server{
	{"MariaDB", sqlfence.MySQL, func(t testing.TB) *sql.DB { return mysqltest.NewDB(t) }},
	{"MariaDB found rows", sqlfence.MySQL, openMariaDBFoundRows},
	{"SQLite", sqlfence.SQLite, openSQLite},
	{"PostgreSQL", sqlfence.PostgreSQL, openPostgres},
}

func openMariaDBFoundRows(t testing.TB) *sql.DB {
	t.Helper()
	cfg := mysqltest.New(t).NewDatabase(t)
	cfg.ClientFoundRows = true
	return mysqltest.Open(t, cfg)
}

// eachServer runs fn as a subtest per server.
func eachServer(t *testing.T, fn func(t *testing.T, srv server)) {
	t.Helper()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) { fn(t, srv) })
	}
}

// openSQLite opens a fresh database file in WAL mode and with no
// busy_timeout, so that a writer that finds another's lock gets
// SQLITE_BUSY at once: the package must cope without the user's help.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	return openSQLiteDSN(t, "?_pragma=journal_mode(WAL)")
}

func openSQLiteDSN(t testing.TB, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "test.db")+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openPostgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.New(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mustExec(t *testing.T, db sqlfence.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: got error %v, want nil", query, err)
	}
}

// newStore returns a Store on a fresh database of srv, its table created.
func newStore(t *testing.T, srv server, opts ...sqlfence.Option) (*sql.DB, *sqlfence.Store) {
	t.Helper()
	db := srv.open(t)
	s, err := sqlfence.NewStore(db, srv.d, sqlfence.Identifier{sqlfence.DefaultStoreTable}, opts...)
	if err != nil {
		t.Fatalf("NewStore: got error %v, want nil", err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatalf("CreateTable: got error %v, want nil", err)
	}
	return db, s
}

// accountsDDL creates the accounts table (id, balance, note, fence) in a
// dialect's own words.
func accountsDDL(d sqlfence.Dialect) string {
	if d == sqlfence.MySQL {
		return "CREATE TABLE accounts (id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0, note TEXT, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
	}
	return "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0, note TEXT, fence BIGINT NOT NULL DEFAULT 0)"
}

// newAccounts returns a fresh database of srv holding the accounts table,
// and a fenced view of it.
func newAccounts(t *testing.T, srv server, opts ...sqlfence.TableOption) (*sql.DB, *sqlfence.Table) {
	t.Helper()
	db := srv.open(t)
	mustExec(t, db, accountsDDL(srv.d))
	tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"accounts"}, append([]sqlfence.TableOption{sqlfence.WithKeyColumn("id")}, opts...)...)
	if err != nil {
		t.Fatalf("NewTable: got error %v, want nil", err)
	}
	return db, tbl
}

// ph is the dialect's placeholder n (1-based) for the tests' own SQL.
func ph(d sqlfence.Dialect, n int) string {
	if d == sqlfence.PostgreSQL {
		return "$" + string(rune('0'+n))
	}
	return "?"
}

// account reads one row of accounts; ok is false when there is none.
func account(t *testing.T, srv server, db sqlfence.DB, id string) (balance, fenceTok int64, ok bool) {
	t.Helper()
	err := db.QueryRowContext(context.Background(), "SELECT balance, fence FROM accounts WHERE id = "+ph(srv.d, 1), id).Scan(&balance, &fenceTok)
	if err == sql.ErrNoRows {
		return 0, 0, false
	}
	if err != nil {
		t.Fatalf("reading account %q: %v", id, err)
	}
	return balance, fenceTok, true
}

func wantAccount(t *testing.T, srv server, db sqlfence.DB, id string, balance, fenceTok int64) {
	t.Helper()
	b, f, ok := account(t, srv, db, id)
	if !ok || b != balance || f != fenceTok {
		t.Fatalf("account %q: got balance %d fence %d (exists %v), want balance %d fence %d", id, b, f, ok, balance, fenceTok)
	}
}
