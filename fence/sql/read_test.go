package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// TestTableGetForUpdate: the fenced read returns the row and raises its
// fence, so that an older token's read or write is refused after it; it
// refuses a lower token and changes nothing; a missing row is not found
// (and not created); a column the table lacks is ErrSchema.
func TestTableGetForUpdate(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance, note, fence) VALUES ('a', 100, 'x', 3)")
		var bal int64
		var note sql.NullString
		if err := tbl.GetForUpdate(ctx, db, "a", 5, []string{"balance", "note"}, &bal, &note); err != nil {
			t.Fatalf("GetForUpdate(token 5) over fence 3: got %v, want nil", err)
		}
		if bal != 100 || note.String != "x" {
			t.Fatalf("GetForUpdate: got balance %d note %q, want 100 and \"x\"", bal, note.String)
		}
		wantAccount(t, srv, db, "a", 100, 5)
		if err := tbl.GetForUpdate(ctx, db, "a", 5, []string{"balance"}, &bal); err != nil {
			t.Fatalf("GetForUpdate again with the same token: got %v, want nil", err)
		}
		fencewant.Stale(t, tbl.GetForUpdate(ctx, db, "a", 4, []string{"balance"}, &bal), 4, 5)
		fencewant.Stale(t, tbl.Update(ctx, db, "a", 4, sqlfence.Set("balance", 1)), 4, 5)
		if err := tbl.GetForUpdate(ctx, db, "a", 6, nil); err != nil {
			t.Fatalf("GetForUpdate with no columns (a claim only): got %v, want nil", err)
		}
		wantAccount(t, srv, db, "a", 100, 6)

		err := tbl.GetForUpdate(ctx, db, "missing", 9, []string{"balance"}, &bal)
		if !errors.Is(err, fence.ErrNotFound) || !errors.Is(err, sqlfence.ErrRowNotFound) {
			t.Fatalf("GetForUpdate of a missing row: got %v, want fence.ErrNotFound and ErrRowNotFound", err)
		}
		if _, _, ok := account(t, srv, db, "missing"); ok {
			t.Fatal("GetForUpdate of a missing row created it")
		}
		// SQLite reads a double-quoted name that names no column as a
		// string, unless it is qualified: the read must not return the
		// column's name as its value.
		var s string
		err = tbl.GetForUpdate(ctx, db, "a", 6, []string{"no_such_column"}, &s)
		if !errors.Is(err, sqlfence.ErrSchema) || !strings.Contains(err.Error(), "no_such_column") {
			t.Fatalf("GetForUpdate of an unknown column: got %q, %v, want ErrSchema naming the column", s, err)
		}
	})
}

// TestTableGetForUpdateTriggers: on a table with an AUTO_INCREMENT column
// and row triggers that insert (leavesSchema's), the fenced read works.
// In MySQL such a trigger resets what LAST_INSERT_ID reports for the
// UPDATE (0, not the token), so the read may not rely on it, as
// Fences.Advance does on the fence table.
func TestTableGetForUpdateTriggers(t *testing.T) {
	for _, srv := range []server{servers[0], servers[2]} {
		t.Run(srv.name, func(t *testing.T) {
			db, jobs := leavesSchema(t, srv)
			ctx := t.Context()
			if err := jobs.Upsert(ctx, db, "j", 4, sqlfence.Set("payload", "p")); err != nil {
				t.Fatal(err)
			}
			var payload string
			if err := jobs.GetForUpdate(ctx, db, "j", 7, []string{"payload"}, &payload); err != nil || payload != "p" {
				t.Fatalf("GetForUpdate: got %q, %v, want \"p\", nil", payload, err)
			}
			fencewant.Stale(t, jobs.GetForUpdate(ctx, db, "j", 5, []string{"payload"}, &payload), 5, 7)
			fencewant.Stale(t, jobs.Upsert(ctx, db, "j", 6, sqlfence.Set("payload", "late")), 6, 7)
		})
	}
}

// TestTableGetForUpdateLostUpdate is the lost update of issue 36. T1, an
// older holder (tokens 2 for A, 3 for B), moves 100 from A to B in a
// transaction and has written A, uncommitted. T2, the newer holder (4 and
// 6), moves 10 from A to B, computing the balances from what it read.
// Read with GetForUpdate, T2's read of A waits for T1 (MariaDB,
// PostgreSQL) or is refused (SQLite, whose single write lock T1 holds)
// and, T1 committed, reads what T1 wrote: both transfers are kept. The
// control reads with a plain SELECT, then writes with Table.Update, and
// loses T1's 100 with no error on either side.
func TestTableGetForUpdateLostUpdate(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance) VALUES ('A', 1000), ('B', 1000), ('C', 1000), ('D', 1000)")

		t1 := olderTransfer(t, db, tbl, "A")
		fenced := func() error {
			return newerTransfer(ctx, db, tbl, "A", "B", func(tx *sql.Tx, id string, tok fence.Token) (int64, error) {
				var bal int64
				err := tbl.GetForUpdate(ctx, tx, id, tok, []string{"balance"}, &bal)
				return bal, err
			})
		}
		var pending chan error
		if srv.d == sqlfence.SQLite {
			if err := fenced(); !errors.Is(err, sqlfence.ErrRetryable) {
				t.Fatalf("T2's fenced read while T1 holds the write lock: got %v, want ErrRetryable (SQLITE_BUSY)", err)
			}
		} else {
			pending = make(chan error, 1)
			go func() { pending <- fenced() }()
			waitRowLockWait(t, srv, db)
		}
		t1("B")
		var err error
		if pending != nil {
			err = <-pending
		} else {
			err = fenced() // T2 again, T1 committed
		}
		if err != nil {
			t.Fatalf("T2, T1 committed: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "A", 890, 4)
		wantAccount(t, srv, db, "B", 1110, 6)

		// Control: plain SELECTs while T1 is uncommitted, then T2's
		// fenced writes once T1 has committed.
		t1 = olderTransfer(t, db, tbl, "C")
		c, _, _ := account(t, srv, db, "C")
		d, _, _ := account(t, srv, db, "D")
		t1("D")
		err = newerTransfer(ctx, db, tbl, "C", "D", func(_ *sql.Tx, id string, _ fence.Token) (int64, error) {
			return map[string]int64{"C": c, "D": d}[id], nil
		})
		if err != nil {
			t.Fatalf("control T2: got %v, want nil (its writes pass their fences)", err)
		}
		cBal, _, _ := account(t, srv, db, "C")
		dBal, _, _ := account(t, srv, db, "D")
		if cBal != 990 || dBal != 1010 {
			t.Fatalf("control: got C=%d D=%d, want 990 and 1010, T1's transfer lost: the case proves nothing here", cBal, dBal)
		}
	})
}

// olderTransfer begins T1 (tokens 2 and 3), takes 100 from account from,
// and returns a function that adds it to account to and commits, failing
// the test if either fails.
func olderTransfer(t *testing.T, db *sql.DB, tbl *sqlfence.Table, from string) func(to string) {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if err := tbl.Update(ctx, tx, from, 2, sqlfence.Add("balance", -100)); err != nil {
		t.Fatalf("T1's write of %s: got %v, want nil", from, err)
	}
	return func(to string) {
		t.Helper()
		if err := tbl.Update(ctx, tx, to, 3, sqlfence.Add("balance", 100)); err != nil {
			t.Fatalf("T1's write of %s: got %v, want nil", to, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("T1's commit: got %v, want nil", err)
		}
	}
}

// newerTransfer is T2 (tokens 4 and 6): in one transaction it reads both
// balances with read, then writes from - 10 and to + 10 as computed.
func newerTransfer(ctx context.Context, db *sql.DB, tbl *sqlfence.Table, from, to string,
	read func(tx *sql.Tx, id string, tok fence.Token) (int64, error)) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	a, err := read(tx, from, 4)
	if err != nil {
		return err
	}
	b, err := read(tx, to, 6)
	if err != nil {
		return err
	}
	if err := tbl.Update(ctx, tx, from, 4, sqlfence.Set("balance", a-10)); err != nil {
		return err
	}
	if err := tbl.Update(ctx, tx, to, 6, sqlfence.Set("balance", b+10)); err != nil {
		return err
	}
	return tx.Commit()
}

// waitRowLockWait waits until a statement of srv (MariaDB or PostgreSQL)
// waits for a row lock: in MariaDB, whatever it is (a fenced read's is a
// SELECT ... FOR UPDATE, a fence's an UPDATE).
func waitRowLockWait(t *testing.T, srv server, db *sql.DB) {
	t.Helper()
	if srv.d == sqlfence.MySQL {
		waitStatement(t, db, "")
		return
	}
	poll.Until(t, "a statement waiting for a row lock", func() bool {
		var n int
		err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n >= 1
	})
}

// TestAdd: an Add assignment adds to the column in the statement, in
// Update and in Upsert (a new row gets the delta), under the fence; a
// delta of 0 with the same token, which MySQL counts as no row changed, is
// accepted.
func TestAdd(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 100, 3)")
		steps := []struct {
			name    string
			write   func() error
			balance int64
			fence   int64
		}{
			{"Update -30", func() error { return tbl.Update(ctx, db, "a", 5, sqlfence.Add("balance", -30)) }, 70, 5},
			{"Update +0, same token", func() error { return tbl.Update(ctx, db, "a", 5, sqlfence.Add("balance", 0)) }, 70, 5},
			{"Update +5 and a Set", func() error {
				return tbl.Update(ctx, db, "a", 6, sqlfence.Add("balance", 5), sqlfence.Set("note", "n"))
			}, 75, 6},
			{"Upsert +20", func() error { return tbl.Upsert(ctx, db, "a", 6, sqlfence.Add("balance", 20)) }, 95, 6},
			{"Upsert +0, same token", func() error { return tbl.Upsert(ctx, db, "a", 6, sqlfence.Add("balance", 0)) }, 95, 6},
		}
		for _, s := range steps {
			if err := s.write(); err != nil {
				t.Fatalf("%s: got %v, want nil", s.name, err)
			}
			wantAccount(t, srv, db, "a", s.balance, s.fence)
		}
		fencewant.Stale(t, tbl.Update(ctx, db, "a", 4, sqlfence.Add("balance", 1)), 4, 6)
		fencewant.Stale(t, tbl.Upsert(ctx, db, "a", 4, sqlfence.Add("balance", 1)), 4, 6)
		wantAccount(t, srv, db, "a", 95, 6)
		if err := tbl.Upsert(ctx, db, "new", 2, sqlfence.Add("balance", 7)); err != nil {
			t.Fatalf("Upsert of a new row: got %v, want nil", err)
		}
		wantAccount(t, srv, db, "new", 7, 2)
		if err := tbl.Update(ctx, db, "missing", 2, sqlfence.Add("balance", 7)); !errors.Is(err, sqlfence.ErrRowNotFound) {
			t.Fatalf("Update of a missing row: got %v, want ErrRowNotFound", err)
		}
	})
}
