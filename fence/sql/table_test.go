package sqlfence_test

import (
	"database/sql"
	"errors"
	"testing"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
)

func TestUpdate(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 3)")
		if err := tbl.Update(ctx, db, "a", 5, sqlfence.Set("balance", 50), sqlfence.Set("note", "five")); err != nil {
			t.Fatalf("Update with a higher token: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "a", 50, 5)
		if err := tbl.Update(ctx, db, "a", 5, sqlfence.Set("balance", 55)); err != nil {
			t.Fatalf("Update with the same token: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "a", 55, 5)
		fencewant.Stale(t, tbl.Update(ctx, db, "a", 4, sqlfence.Set("balance", 40)), 4, 5)
		wantAccount(t, srv, db, "a", 55, 5)
		if err := tbl.Update(ctx, db, "missing", 9, sqlfence.Set("balance", 1)); !errors.Is(err, sqlfence.ErrRowNotFound) {
			t.Fatalf("Update of a missing row: got %v, want ErrRowNotFound", err)
		}
		if err := tbl.Update(ctx, db, "a", 6); err != nil {
			t.Fatalf("Update with no assignment: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "a", 55, 6)
	})
}

func TestUpsert(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		if err := tbl.Upsert(ctx, db, "a", 5, sqlfence.Set("balance", 50)); err != nil {
			t.Fatalf("first Upsert: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "a", 50, 5)
		if err := tbl.Upsert(ctx, db, "a", 7, sqlfence.Set("balance", 70)); err != nil {
			t.Fatalf("Upsert with a higher token: got %v, want nil", err)
		}
		fencewant.Stale(t, tbl.Upsert(ctx, db, "a", 6, sqlfence.Set("balance", 60)), 6, 7)
		wantAccount(t, srv, db, "a", 70, 7)
		if err := tbl.Upsert(ctx, db, "a", 7, sqlfence.Set("balance", 70)); err != nil {
			t.Fatalf("Upsert of the same values with the same token: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "a", 70, 7)
	})
}

// mariaDBFoundRows opens a fresh MariaDB database with clientFoundRows as
// given: off (the driver's default) MySQL counts rows changed, on rows
// matched.
func mariaDBFoundRows(t *testing.T, foundRows bool) *sql.DB {
	t.Helper()
	cfg := mysqltest.New(t).NewDatabase(t)
	cfg.ClientFoundRows = foundRows
	db := mysqltest.Open(t, cfg)
	mustExec(t, db, accountsDDL(sqlfence.MySQL))
	return db
}

// TestMySQLChangedRows: by default MySQL's affected-rows count is rows
// changed, so a refused update and a rewrite of identical values with the
// same token both count 0, and an upsert counts 2 for an update, 1 for an
// insert and 0 for either of those. The control shows the raw counts that
// a "0 rows means stale" rule would confuse; Update and Upsert must tell
// them apart, with clientFoundRows off and on.
func TestMySQLChangedRows(t *testing.T) {
	srv := servers[0]
	for _, foundRows := range []bool{false, true} {
		t.Run(map[bool]string{false: "changed rows (default)", true: "clientFoundRows=true"}[foundRows], func(t *testing.T) {
			db := mariaDBFoundRows(t, foundRows)
			ctx := t.Context()
			mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 5), ('b', 1, 9)")
			same := rowsAffected(t, db, "UPDATE accounts SET balance = 1, fence = 5 WHERE id = 'a' AND fence <= 5")
			refused := rowsAffected(t, db, "UPDATE accounts SET balance = 2, fence = 5 WHERE id = 'b' AND fence <= 5")
			if !foundRows && (same != 0 || refused != 0) {
				t.Fatalf("control: identical rewrite counts %d, refused update %d: want 0 and 0 (MySQL counts rows changed)", same, refused)
			}
			tbl, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
			if err != nil {
				t.Fatal(err)
			}
			if err := tbl.Update(ctx, db, "a", 5, sqlfence.Set("balance", 1)); err != nil {
				t.Errorf("Update rewriting identical values with the same token: got %v, want nil", err)
			}
			fencewant.Stale(t, tbl.Update(ctx, db, "b", 5, sqlfence.Set("balance", 1)), 5, 9)
			wantAccount(t, srv, db, "b", 1, 9)

			upsertCounts := []struct {
				name string
				sql  string
				want int64
			}{
				{"insert", "('c', 1, 5)", 1},
				{"update", "('c', 2, 6)", 2},
				{"same values", "('c', 2, 6)", map[bool]int64{false: 0, true: 1}[foundRows]},
				{"refused", "('c', 3, 5)", map[bool]int64{false: 0, true: 1}[foundRows]},
			}
			for _, u := range upsertCounts {
				got := rowsAffected(t, db, "INSERT INTO accounts (id, balance, fence) VALUES "+u.sql+
					" ON DUPLICATE KEY UPDATE balance = IF(fence <= VALUES(fence), VALUES(balance), balance), fence = IF(fence <= VALUES(fence), VALUES(fence), fence)")
				if got != u.want {
					t.Errorf("control: ON DUPLICATE KEY UPDATE, %s: counts %d, want %d", u.name, got, u.want)
				}
			}
			if err := tbl.Upsert(ctx, db, "c", 6, sqlfence.Set("balance", 2)); err != nil {
				t.Errorf("Upsert rewriting identical values with the same token: got %v, want nil", err)
			}
			fencewant.Stale(t, tbl.Upsert(ctx, db, "c", 5, sqlfence.Set("balance", 2)), 5, 6)
			if err := tbl.Upsert(ctx, db, "d", 1, sqlfence.Set("balance", 1)); err != nil {
				t.Errorf("Upsert inserting: got %v, want nil", err)
			}
			wantAccount(t, srv, db, "c", 2, 6)
			wantAccount(t, srv, db, "d", 1, 1)
		})
	}
}

func rowsAffected(t *testing.T, db *sql.DB, query string) int64 {
	t.Helper()
	res, err := db.ExecContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMySQLRepeatableReadSnapshot: under MySQL's default REPEATABLE READ, a
// plain SELECT in a transaction reads the snapshot of its first read, while
// UPDATE reads the newest row. An older holder whose transaction saw the
// row at its own token, and who rewrites the values it saw after a newer
// holder's write committed, has its update refused (0 rows), and a read
// back from the snapshot would show its own token and values: "identical,
// accepted". The read back must be a locking read, which sees the newer
// fence. The control reads the snapshot as a plain SELECT would.
func TestMySQLRepeatableReadSnapshot(t *testing.T) {
	srv := servers[0]
	db, tbl := newAccounts(t, srv)
	ctx := t.Context()
	mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 100, 5)")
	old, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback()
	wantAccount(t, srv, old, "a", 100, 5) // the snapshot
	if err := tbl.Update(ctx, db, "a", 9, sqlfence.Set("balance", 200)); err != nil {
		t.Fatalf("newer holder's Update: got %v, want nil", err)
	}
	fencewant.Stale(t, tbl.Update(ctx, old, "a", 5, sqlfence.Set("balance", 100)), 5, 9)
	// Control: the transaction's snapshot still shows the old row.
	var balance, fenceTok int64
	if err := old.QueryRowContext(ctx, "SELECT balance, fence FROM accounts WHERE id = 'a'").Scan(&balance, &fenceTok); err != nil {
		t.Fatal(err)
	}
	if balance != 100 || fenceTok != 5 {
		t.Fatalf("control: the snapshot shows balance %d fence %d, want 100 and 5 (REPEATABLE READ)", balance, fenceTok)
	}
	if err := old.Commit(); err != nil {
		t.Fatal(err)
	}
	wantAccount(t, srv, db, "a", 200, 9)
}

// TestMySQLRepeatableReadFence: the same for a fence row raised by a
// transaction whose snapshot predates the newer holder's commit: the
// upsert reads the newest row and is refused, with its fence.
func TestMySQLRepeatableReadFence(t *testing.T) {
	for _, srv := range servers[:2] {
		t.Run(srv.name, func(t *testing.T) {
			db, f := newLedger(t, srv)
			ctx := t.Context()
			if err := f.Advance(ctx, db, "r", 5); err != nil {
				t.Fatal(err)
			}
			old, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer old.Rollback()
			var snap int64
			if err := old.QueryRowContext(ctx, "SELECT token FROM fencelock_fences WHERE resource = 'r'").Scan(&snap); err != nil || snap != 5 {
				t.Fatalf("snapshot: got %d, %v, want 5", snap, err)
			}
			if err := f.Advance(ctx, db, "r", 9); err != nil {
				t.Fatal(err)
			}
			fencewant.Stale(t, f.Advance(ctx, old, "r", 5), 5, 9)
		})
	}
}
