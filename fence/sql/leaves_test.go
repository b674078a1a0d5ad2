package sqlfence_test

import (
	"database/sql"
	"fmt"
	"testing"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// leavesSchema creates jobs (an auto-increment id, a unique name, a
// payload, a fence) with row triggers that log to trigger_log, in srv's
// dialect.
func leavesSchema(t *testing.T, srv server) (*sql.DB, *sqlfence.Table) {
	t.Helper()
	db := srv.open(t)
	var ddl []string
	switch srv.d {
	case sqlfence.MySQL:
		ddl = []string{
			"CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64) NOT NULL UNIQUE, payload TEXT, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
			"CREATE TABLE trigger_log (what VARCHAR(32) NOT NULL)",
			"CREATE TRIGGER bi BEFORE INSERT ON jobs FOR EACH ROW INSERT INTO trigger_log VALUES ('before insert')",
			"CREATE TRIGGER bu BEFORE UPDATE ON jobs FOR EACH ROW INSERT INTO trigger_log VALUES ('before update')",
			"CREATE TRIGGER au AFTER UPDATE ON jobs FOR EACH ROW INSERT INTO trigger_log VALUES ('after update')",
		}
	case sqlfence.SQLite:
		ddl = []string{
			"CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, payload TEXT, fence BIGINT NOT NULL DEFAULT 0)",
			"CREATE TABLE trigger_log (what TEXT NOT NULL)",
			"CREATE TRIGGER bi BEFORE INSERT ON jobs BEGIN INSERT INTO trigger_log VALUES ('before insert'); END",
			"CREATE TRIGGER bu BEFORE UPDATE ON jobs BEGIN INSERT INTO trigger_log VALUES ('before update'); END",
			"CREATE TRIGGER au AFTER UPDATE ON jobs BEGIN INSERT INTO trigger_log VALUES ('after update'); END",
		}
	}
	for _, q := range ddl {
		mustExec(t, db, q)
	}
	tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"jobs"}, sqlfence.WithKeyColumn("name"))
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// TestRefusedWriteLeaves records what a refused write still does, for
// docs/sql.md's table: in MariaDB a refused Table.Upsert (INSERT ... ON
// DUPLICATE KEY UPDATE) fires the BEFORE INSERT, BEFORE UPDATE and AFTER
// UPDATE row triggers and takes an AUTO_INCREMENT value, while a refused
// Table.Update fires none; in SQLite neither fires a trigger or takes an
// id (the upsert's SELECT gives no row when the fence is higher).
func TestRefusedWriteLeaves(t *testing.T) {
	for _, srv := range []server{servers[0], servers[2]} {
		t.Run(srv.name, func(t *testing.T) {
			db, tbl := leavesSchema(t, srv)
			ctx := t.Context()
			if err := tbl.Upsert(ctx, db, "j", 5, sqlfence.Set("payload", "five")); err != nil {
				t.Fatal(err)
			}
			log := func() string { return triggerLog(t, db) }
			_ = log()
			before := nextID(t, db)
			fencewant.Stale(t, tbl.Update(ctx, db, "j", 4, sqlfence.Set("payload", "four")), 4, 5)
			if got := log(); got != "[]" {
				t.Errorf("refused Update: triggers %s, want none", got)
			}
			fencewant.Stale(t, tbl.Upsert(ctx, db, "j", 4, sqlfence.Set("payload", "four")), 4, 5)
			want := map[sqlfence.Dialect]string{sqlfence.MySQL: "[before insert before update after update]", sqlfence.SQLite: "[]"}[srv.d]
			if got := log(); got != want {
				t.Errorf("refused Upsert: triggers %s, want %s", got, want)
			}
			if err := tbl.Upsert(ctx, db, "k", 6, sqlfence.Set("payload", "six")); err != nil {
				t.Fatal(err)
			}
			gap := nextID(t, db) - before - 1 // ids the refused writes took
			wantGap := map[sqlfence.Dialect]int64{sqlfence.MySQL: 1, sqlfence.SQLite: 0}[srv.d]
			if gap != wantGap {
				t.Errorf("auto-increment ids taken by the refused writes: got %d, want %d", gap, wantGap)
			}
		})
	}
}

func triggerLog(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT what FROM trigger_log")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		got = append(got, w)
	}
	mustExec(t, db, "DELETE FROM trigger_log")
	return fmt.Sprint(got)
}

// nextID is the highest id in jobs.
func nextID(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRowContext(t.Context(), "SELECT COALESCE(MAX(id), 0) FROM jobs").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
