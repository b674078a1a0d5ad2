package sqlfence_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// writesSeen returns what changes when the session c (or, in PostgreSQL,
// anyone) writes the row 'a' of accounts: in MariaDB, the session's count
// of UPDATE statements run; in SQLite, the connection's count of rows
// changed; in PostgreSQL, the row's version (a new version has a new ctid
// and xmin, a row lock sets xmax).
func writesSeen(t *testing.T, srv server, c *sql.Conn) string {
	t.Helper()
	q := map[sqlfence.Dialect]string{
		sqlfence.MySQL:      "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_UPDATE'",
		sqlfence.SQLite:     "SELECT total_changes()",
		sqlfence.PostgreSQL: "SELECT ctid::text || ' ' || xmin::text || ' ' || xmax::text FROM accounts WHERE id = 'a'",
	}[srv.d]
	var v string
	if err := c.QueryRowContext(t.Context(), q).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTableGetForUpdateRepeated: outside a transaction, a holder's claim
// of a row it claimed already is a read that writes nothing, 100 times
// over (writesSeen unchanged), whereas the first claim wrote (the
// control: the check sees a write). A stale token is still refused, and a
// newer holder's claim between two reads is seen.
func TestTableGetForUpdateRepeated(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 4)")
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		before := writesSeen(t, srv, c)
		var b int64
		if err := tbl.GetForUpdate(ctx, c, "a", 7, []string{"balance"}, &b); err != nil || b != 120 {
			t.Fatalf("first claim: got balance %d, error %v, want 120, nil", b, err)
		}
		claimed := writesSeen(t, srv, c)
		if claimed == before {
			t.Fatalf("control: writes seen %q before and after the first claim, want a change (it writes)", claimed)
		}
		for i := range 100 {
			b = 0
			if err := tbl.GetForUpdate(ctx, c, "a", 7, []string{"balance"}, &b); err != nil || b != 120 {
				t.Fatalf("repeated claim %d: got balance %d, error %v, want 120, nil", i, b, err)
			}
		}
		if got := writesSeen(t, srv, c); got != claimed {
			t.Errorf("100 repeated claims: writes seen went from %q to %q, want no change (no write)", claimed, got)
		}
		fencewant.Stale(t, tbl.GetForUpdate(ctx, c, "a", 5, []string{"balance"}, &b), 5, 7)
		if err := tbl.GetForUpdate(ctx, db, "a", 9, nil); err != nil {
			t.Fatal(err)
		}
		fencewant.Stale(t, tbl.GetForUpdate(ctx, c, "a", 7, []string{"balance"}, &b), 7, 9)
		wantAccount(t, srv, db, "a", 120, 9)
	})
}

// TestTableGetForUpdateRepeatedInTx: in a transaction, a claim of a row
// whose fence is the token already still locks it (SQLite: takes the
// write lock) to the transaction's end, so that another session cannot
// lock it (write, in SQLite) without waiting; the control, a plain SELECT
// in the transaction, leaves it free.
func TestTableGetForUpdateRepeatedInTx(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		ctx := t.Context()
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 7), ('b', 0, 0)")
		// A lock taken without waiting, and what its refusal says.
		lock, locked := "SELECT id FROM accounts WHERE id = 'a' FOR UPDATE NOWAIT", "could not obtain lock"
		switch srv.d {
		case sqlfence.MySQL:
			locked = "Lock wait timeout"
		case sqlfence.SQLite: // no FOR UPDATE: a write, refused by the write lock
			lock, locked = "UPDATE accounts SET note = 'n' WHERE id = 'b'", "database is locked"
		}
		for _, tt := range []struct {
			name   string
			read   func(tx *sql.Tx) error
			locked bool
		}{
			{"GetForUpdate", func(tx *sql.Tx) error {
				var b int64
				return tbl.GetForUpdate(ctx, tx, "a", 7, []string{"balance"}, &b)
			}, true},
			{"control: plain SELECT", func(tx *sql.Tx) error {
				var b int64
				return tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 'a'").Scan(&b)
			}, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				if err := tt.read(tx); err != nil {
					t.Fatal(err)
				}
				_, err = db.ExecContext(context.Background(), lock)
				if got := err != nil && strings.Contains(err.Error(), locked); got != tt.locked {
					t.Fatalf("another session's %q: got %v, want refused as locked: %v", lock, err, tt.locked)
				}
			})
		}
	})
}
