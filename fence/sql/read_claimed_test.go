package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// writesSeen returns what changes when the session c (or, in PostgreSQL,
// anyone) writes the row of table whose key column col is key: in
// MariaDB, the session's count of INSERT and UPDATE statements run; in
// SQLite, the connection's count of rows changed; in PostgreSQL, the
// row's version (a new version has a new ctid and xmin, a row lock sets
// xmax).
func writesSeen(t *testing.T, srv server, c *sql.Conn, table, col, key string) string {
	t.Helper()
	q, args := "SELECT total_changes()", []any(nil)
	switch srv.d {
	case sqlfence.MySQL:
		q = "SELECT SUM(VARIABLE_VALUE) FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME IN ('COM_INSERT', 'COM_UPDATE')"
	case sqlfence.PostgreSQL:
		q, args = "SELECT ctid::text || ' ' || xmin::text || ' ' || xmax::text FROM "+table+" WHERE "+col+" = $1", []any{key}
	}
	var v string
	if err := c.QueryRowContext(t.Context(), q, args...).Scan(&v); err != nil {
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
		before := writesSeen(t, srv, c, "accounts", "id", "a")
		var b int64
		if err := tbl.GetForUpdate(ctx, c, "a", 7, []string{"balance"}, &b); err != nil || b != 120 {
			t.Fatalf("first claim: got balance %d, error %v, want 120, nil", b, err)
		}
		claimed := writesSeen(t, srv, c, "accounts", "id", "a")
		if claimed == before {
			t.Fatalf("control: writes seen %q before and after the first claim, want a change (it writes)", claimed)
		}
		for i := range 100 {
			b = 0
			if err := tbl.GetForUpdate(ctx, c, "a", 7, []string{"balance"}, &b); err != nil || b != 120 {
				t.Fatalf("repeated claim %d: got balance %d, error %v, want 120, nil", i, b, err)
			}
		}
		if got := writesSeen(t, srv, c, "accounts", "id", "a"); got != claimed {
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

// TestStoreGetForUpdateRepeated: outside a transaction, a Store's claim
// of a key whose floor is the token already is a read that writes nothing,
// 100 times over, whereas the first claim wrote (the control). A stale
// token is still refused; an Update by the floor's holder writes its
// value.
func TestStoreGetForUpdateRepeated(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db := srv.open(t)
		ctx := t.Context()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := sqlfence.NewStore(c, srv.d, sqlfence.Identifier{sqlfence.DefaultStoreTable})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "k", 3, []byte("v")); err != nil {
			t.Fatal(err)
		}
		seen := func() string { return writesSeen(t, srv, c, sqlfence.DefaultStoreTable, "key", "k") }
		before := seen()
		if _, err := s.GetForUpdate(ctx, "k", 7); err != nil {
			t.Fatal(err)
		}
		claimed := seen()
		if claimed == before {
			t.Fatalf("control: writes seen %q before and after the first claim, want a change (it writes)", claimed)
		}
		for i := range 100 {
			if r, err := s.GetForUpdate(ctx, "k", 7); err != nil || string(r.Value) != "v" || r.Token != 7 {
				t.Fatalf("repeated claim %d: got %+v, %v, want v with token 7", i, r, err)
			}
		}
		if got := seen(); got != claimed {
			t.Errorf("100 repeated claims: writes seen went from %q to %q, want no change (no write)", claimed, got)
		}
		fencewant.Stale(t, func() error { _, err := s.GetForUpdate(ctx, "k", 6); return err }(), 6, 7)
		if err := s.Update(ctx, "k", 7, func(old fence.Record) ([]byte, error) { return append(old.Value, '+'), nil }); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "v+" {
			t.Fatalf("after Update: got %+v, %v, want v+", r, err)
		}
	})
}

// TestStoreFirstClaimsInTxMySQL: in MySQL transactions, first claims of
// new keys (no row yet) by two transactions at once both go through. A
// locking read of a missing key (SELECT ... FOR UPDATE under REPEATABLE
// READ) takes a gap lock, which blocks the other's insert: A claims k1,
// B's claim of k2 waits on A's gap, and A's claim of k3 on B's, a
// deadlock that rolls one back. The claim's upsert alone takes no gap
// lock (the control: Store.GetForUpdate outside a transaction, and each
// claim's read through a plain SELECT).
func TestStoreFirstClaimsInTxMySQL(t *testing.T) {
	srv := servers[0]
	db, _ := newStore(t, srv)
	ctx := t.Context()
	store := func(tx *sql.Tx) *sqlfence.Store {
		s, err := sqlfence.NewStore(tx, srv.d, sqlfence.Identifier{sqlfence.DefaultStoreTable})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	txA, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback()
	txB, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer txB.Rollback()
	a, b := store(txA), store(txB)
	// A new key has no value: its claim reports fence.ErrNotFound.
	claim := func(s *sqlfence.Store, key string) error {
		if _, err := s.GetForUpdate(ctx, key, 5); !errors.Is(err, fence.ErrNotFound) {
			return err
		}
		return nil
	}
	if err := claim(a, "k1"); err != nil {
		t.Fatalf("A's claim of k1: %v", err)
	}
	bDone := make(chan error, 1)
	go func() {
		bDone <- claim(b, "k2")
	}()
	// B's claim either returns or waits for a lock of A's.
	deadline := time.Now().Add(5 * time.Second)
	waiting := false
	for !waiting && len(bDone) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("B's claim of k2 neither returned nor waited for a lock in 5 s")
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		waiting = n > 0
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	if err := claim(a, "k3"); err != nil {
		t.Errorf("A's claim of k3 (B waiting for A: %v): got %v, want nil", waiting, err)
	}
	if err := txA.Commit(); err != nil {
		t.Errorf("A's commit: %v", err)
	}
	if err := <-bDone; err != nil {
		t.Errorf("B's claim of k2 (it waited for A: %v): got %v, want nil", waiting, err)
	}
	if err := txB.Commit(); err != nil {
		t.Errorf("B's commit: %v", err)
	}
}
