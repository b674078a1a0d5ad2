package sqlfence_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	"github.com/fencelock/fencelock/internal/testkit/trypage"
)

// pageRow is a row of docs/sql.md's table of openStore's arguments.
var pageRow = regexp.MustCompile("(?m)^\\| (\\w+) \\| .* \\| `\"(\\w+)\"`, `\"([^\"]+)\"`, `sqlfence\\.(\\w+)` \\|$")

// tryItServer is how TestPageTryIt starts one of docs/sql.md's servers.
type tryItServer struct {
	want  string // in the page's line
	port  string // the line's port, in the line and the row's DSN
	dir   string // the line's scratch directory
	user  string // the line's user, under root
	need  func() error
	howTo string
}

var tryItServers = map[string]tryItServer{
	"MariaDB": {want: "mariadbd", port: "3306", dir: "/tmp/mariadb", need: needMariaDB,
		howTo: "bash .ci/setup.sh, or apt-get install -y mariadb-server"},
	"PostgreSQL": {want: "initdb", port: "5432", dir: "/tmp/pg", user: "postgres", need: needPostgres,
		howTo: "bash .ci/setup.sh, or apt-get install -y postgresql"},
}

// docs/sql.md's "Try it on your machine" works as the page says: each
// row of its table, given to the page's openStore (SQLite's in a scratch
// directory, the servers' with the port their line was started on, a free
// one), gives a Store that writes with token 34 and refuses 33.
func TestPageTryIt(t *testing.T) {
	rows := pageRows(t)
	for _, name := range []string{"MariaDB", "PostgreSQL", "SQLite"} {
		t.Run(name, func(t *testing.T) {
			row, ok := rows[name]
			if !ok {
				t.Fatalf("docs/sql.md: no row for %s in the table of openStore's arguments", name)
			}
			var db *sql.DB
			var store *sqlfence.Store
			open := func(ctx context.Context, dsn string) (err error) {
				db, store, err = openStore(ctx, row.driver, dsn, row.dialect)
				return err
			}
			srv, ok := tryItServers[name]
			if !ok {
				if err := open(t.Context(), strings.Replace(row.dsn, "app.db", filepath.Join(t.TempDir(), "app.db"), 1)); err != nil {
					t.Fatal(err)
				}
			} else {
				startPageServer(t, srv, func(ctx context.Context, port int) error {
					return open(ctx, strings.Replace(row.dsn, ":"+srv.port, ":"+strconv.Itoa(port), 1))
				})
			}
			t.Cleanup(func() { _ = db.Close() })
			if err := store.Put(t.Context(), "k", 34, []byte("B")); err != nil {
				t.Fatalf("Put with token 34: got %v, want nil", err)
			}
			fencewant.Stale(t, store.Put(t.Context(), "k", 33, []byte("A")), 33, 34)
			if rec, err := store.Get(t.Context(), "k"); err != nil || rec.Token != 34 || string(rec.Value) != "B" {
				t.Fatalf("Get: got token %d %q %v, want token 34 \"B\"", rec.Token, rec.Value, err)
			}
		})
	}
}

// startPageServer runs srv's line from docs/sql.md until open succeeds.
func startPageServer(t *testing.T, srv tryItServer, open func(ctx context.Context, port int) error) {
	t.Helper()
	if err := srv.need(); err != nil {
		testenv.Unavailable(t, err.Error(), srv.howTo)
	}
	trypage.Start(t, trypage.Run{
		Line: trypage.Line(t, "docs/sql.md", srv.want), Port: srv.port, Dir: srv.dir, User: srv.user,
		Ready: open,
	})
}

// row is what a row of docs/sql.md's table gives openStore.
type row struct {
	driver, dsn string
	dialect     sqlfence.Dialect
}

// pageRows returns the rows of docs/sql.md's table of openStore's
// arguments, by database.
func pageRows(t *testing.T) map[string]row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(trypage.Root(t), "docs", "sql.md"))
	if err != nil {
		t.Fatal(err)
	}
	dialects := map[string]sqlfence.Dialect{"MySQL": sqlfence.MySQL, "PostgreSQL": sqlfence.PostgreSQL, "SQLite": sqlfence.SQLite}
	rows := map[string]row{}
	for _, m := range pageRow.FindAllStringSubmatch(string(b), -1) {
		d, ok := dialects[m[4]]
		if !ok {
			t.Fatalf("docs/sql.md: the row of %s: no dialect sqlfence.%s", m[1], m[4])
		}
		rows[m[1]] = row{m[2], m[3], d}
	}
	return rows
}

// needMariaDB checks for the programs docs/sql.md's line runs.
func needMariaDB() error {
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		return err
	}
	_, err := os.Stat("/usr/sbin/mariadbd")
	return err
}

// needPostgres checks for the programs docs/sql.md's line runs: in
// Debian's /usr/lib/postgresql/*/bin, or on PATH.
func needPostgres() error {
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
		return nil
	}
	_, err := exec.LookPath("initdb")
	return err
}
