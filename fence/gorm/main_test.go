package gormfence_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/glebarez/sqlite" // pure Go: modernc.org/sqlite's SQLite, no cgo
	"go.uber.org/goleak"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// The package's tests share one MariaDB and one PostgreSQL server; SQLite
// needs none.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(mysqltest.Main(m))) }

// Account is the model the tests write: a fence column by its name.
type Account struct {
	ID      string `gorm:"primaryKey;size:64"`
	Balance int64
	Note    string `gorm:"size:64"`
	Fence   int64  `gorm:"not null;default:0"`
}

// server is one of the three databases every test runs against.
type server struct {
	name string
	open func(t testing.TB) *gorm.DB // a fresh database, the plugin registered
}

var servers = []server{
	{"MariaDB", func(t testing.TB) *gorm.DB { return openGorm(t, mysql.New(mysql.Config{Conn: mysqltest.NewDB(t)})) }},
	{"PostgreSQL", openPostgres},
	{"SQLite", openSQLite},
}

// eachServer runs fn as a subtest per server.
func eachServer(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) { fn(t, srv.open(t)) })
	}
}

func openPostgres(t testing.TB) *gorm.DB {
	t.Helper()
	return openGorm(t, postgres.Open(pgtest.New(t).NewDatabase(t)))
}

// openSQLite opens a fresh database file in WAL mode, with a busy_timeout
// and transactions that take the write lock at BEGIN (_txlock=immediate),
// so that concurrent transactions queue rather than fail with
// SQLITE_BUSY when they upgrade.
func openSQLite(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "test.db") +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	return openGorm(t, sqlite.Open(dsn))
}

// openGorm opens d quietly, registers the plugin, creates the accounts
// table, and closes the pool when t ends.
func openGorm(t testing.TB, d gorm.Dialector, plugin ...gorm.Plugin) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(d, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("gorm.Open: got error %v, want nil", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	if len(plugin) == 0 {
		plugin = []gorm.Plugin{gormfence.Plugin{}}
	}
	if err := db.Use(plugin[0]); err != nil {
		t.Fatalf("db.Use(Plugin): got error %v, want nil", err)
	}
	if err := db.AutoMigrate(&Account{}); err != nil {
		t.Fatalf("AutoMigrate: got error %v, want nil", err)
	}
	return db
}

// pool returns db's *sql.DB.
func pool(t testing.TB, db *gorm.DB) *sql.DB {
	t.Helper()
	p, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mustCreate inserts an account at fence 0.
func mustCreate(t testing.TB, db *gorm.DB, id string, balance int64) {
	t.Helper()
	if err := db.Create(&Account{ID: id, Balance: balance}).Error; err != nil {
		t.Fatalf("Create(%q): got error %v, want nil", id, err)
	}
}

// wantAccount fails t unless the row id holds balance and fence.
func wantAccount(t testing.TB, db *gorm.DB, id string, balance, fenceTok int64) {
	t.Helper()
	var a Account
	if err := db.Session(&gorm.Session{NewDB: true}).Take(&a, "id = ?", id).Error; err != nil {
		t.Fatalf("reading %q: got error %v, want nil", id, err)
	}
	if a.Balance != balance || a.Fence != fenceTok {
		t.Fatalf("account %q: got balance %d fence %d, want balance %d fence %d", id, a.Balance, a.Fence, balance, fenceTok)
	}
}
