package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// newLedger returns a fresh database of srv with the fence table and a
// ledger (seq, token, note) that fenced transactions append to.
func newLedger(t *testing.T, srv server, opts ...sqlfence.Option) (*sql.DB, *sqlfence.Fences) {
	t.Helper()
	db := srv.open(t)
	f, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable}, opts...)
	if err != nil {
		t.Fatalf("NewFences: got %v, want nil", err)
	}
	if err := f.CreateTable(t.Context(), db); err != nil {
		t.Fatalf("CreateTable: got %v, want nil", err)
	}
	mustExec(t, db, "CREATE TABLE ledger (seq BIGINT PRIMARY KEY, token BIGINT NOT NULL, note VARCHAR(64))")
	return db, f
}

// appendLedger appends (token, note) to the ledger in tx, numbering it
// after the rows tx sees.
func appendLedger(ctx context.Context, srv server, tx *sql.Tx, token fence.Token, note string) error {
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM ledger").Scan(&n); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO ledger (seq, token, note) VALUES (%s, %s, %s)",
		ph(srv.d, 1), ph(srv.d, 2), ph(srv.d, 3)), n+1, int64(token), note)
	return err
}

// ledger returns the ledger's tokens in order.
func ledger(t *testing.T, db *sql.DB) []fence.Token {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT token FROM ledger ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var toks []fence.Token
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, fence.Token(tok))
	}
	return toks
}

func TestRunInTx(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newLedger(t, srv)
		ctx := t.Context()
		for _, tok := range []fence.Token{3, 3, 5} {
			err := f.RunInTx(ctx, db, "r", tok, func(tx *sql.Tx) error { return appendLedger(ctx, srv, tx, tok, "ok") })
			if err != nil {
				t.Fatalf("RunInTx with token %d: got %v, want nil", tok, err)
			}
		}
		called := false
		err := f.RunInTx(ctx, db, "r", 4, func(*sql.Tx) error { called = true; return nil })
		fencewant.Stale(t, err, 4, 5)
		if called {
			t.Errorf("a stale RunInTx called its function, want it refused first")
		}
		boom := errors.New("boom")
		if err := f.RunInTx(ctx, db, "r", 6, func(tx *sql.Tx) error {
			if err := appendLedger(ctx, srv, tx, 6, "rolled back"); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("RunInTx whose function fails: got %v, want its error", err)
		}
		if got := fmt.Sprint(ledger(t, db)); got != "[3 3 5]" {
			t.Fatalf("ledger: got %s, want [3 3 5]", got)
		}
		// The failed transaction's fence was rolled back with it.
		if cur, err := f.Current(ctx, db, "r"); err != nil || cur != 5 {
			t.Fatalf("Current: got %d, %v, want 5", cur, err)
		}
		if _, err := f.Current(ctx, db, "other"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Current of a resource never fenced: got %v, want fence.ErrNotFound", err)
		}
	})
}

// TestRunInTxStaleHolder: a deposed holder's transaction after the newer
// holder's is refused. The control runs the same two transactions
// unfenced: the stale one lands after the newer one.
func TestRunInTxStaleHolder(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newLedger(t, srv)
		ctx := t.Context()
		newer := func(tx *sql.Tx) error { return appendLedger(ctx, srv, tx, 2, "newer") }
		older := func(tx *sql.Tx) error { return appendLedger(ctx, srv, tx, 1, "older") }
		if err := f.RunInTx(ctx, db, "r", 2, newer); err != nil {
			t.Fatal(err)
		}
		fencewant.Stale(t, f.RunInTx(ctx, db, "r", 1, older), 1, 2)
		if got := fmt.Sprint(ledger(t, db)); got != "[2]" {
			t.Fatalf("ledger: got %s, want [2]", got)
		}
		{ // control: the same stale transaction, unfenced
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := older(tx); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if got := fmt.Sprint(ledger(t, db)); got != "[2 1]" {
			t.Fatalf("control: ledger after an unfenced stale transaction: got %s, want [2 1]", got)
		}
	})
}

// raceTx runs writers fenced transactions at once, on resources of their
// own when distinct is set, and returns their errors. Each appends its
// token to the ledger.
func raceTx(t *testing.T, srv server, db *sql.DB, f *sqlfence.Fences, writers int, distinct bool, opts ...sqlfence.TxOption) []error {
	t.Helper()
	ctx := t.Context()
	errs := make([]error, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		tok := fence.Token(w + 1)
		res := "r"
		if distinct {
			res = fmt.Sprint("r", w)
		}
		wg.Go(func() {
			<-start
			errs[w] = f.RunInTx(ctx, db, res, tok, func(tx *sql.Tx) error { return appendLedger(ctx, srv, tx, tok, "race") }, opts...)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// TestRunInTxContention: fenced transactions racing on one resource
// commit in token order: the ledger never goes down, and the highest token
// lands. On SQLite (no busy_timeout) the transactions that find the write
// lock taken are retried before their function runs; the control, with
// WithRetries(0), shows SQLITE_BUSY reaching the caller.
func TestRunInTxContention(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newLedger(t, srv)
		errs := raceTx(t, srv, db, f, 8, false)
		for w, err := range errs {
			if err != nil && (w == len(errs)-1 || !errors.Is(err, fence.ErrStale)) {
				t.Errorf("RunInTx with token %d: got %v, want nil or fence.ErrStale (nil for the highest)", w+1, err)
			}
		}
		toks := ledger(t, db)
		for i := 1; i < len(toks); i++ {
			if toks[i] < toks[i-1] {
				t.Fatalf("ledger %v: token %d committed after %d", toks, toks[i], toks[i-1])
			}
		}
		if len(toks) == 0 || toks[len(toks)-1] != 8 {
			t.Fatalf("ledger %v: want it to end with the highest token, 8", toks)
		}
		if srv.d != sqlfence.SQLite {
			return
		}
		bareDB, bare := newLedger(t, srv, sqlfence.WithRetries(0))
		busy := 0
		for range 5 {
			for _, err := range raceTx(t, srv, bareDB, bare, 8, true) {
				if errors.Is(err, sqlfence.ErrRetryable) {
					busy++
				}
			}
		}
		if busy == 0 {
			t.Errorf("control, WithRetries(0): no transaction failed with ErrRetryable, want SQLITE_BUSY to reach some")
		}
	})
}

func TestExec(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newLedger(t, srv)
		ctx := t.Context()
		insert := fmt.Sprintf("INSERT INTO ledger (seq, token, note) VALUES (%s, %s, 'exec')", ph(srv.d, 1), ph(srv.d, 2))
		n, err := f.Exec(ctx, db, "r", 4, insert, 1, 4)
		if err != nil || n != 1 {
			t.Fatalf("Exec: got %d, %v, want 1, nil", n, err)
		}
		_, err = f.Exec(ctx, db, "r", 3, insert, 2, 3)
		fencewant.Stale(t, err, 3, 4)
		if got := fmt.Sprint(ledger(t, db)); got != "[4]" {
			t.Fatalf("ledger: got %s, want [4]", got)
		}
	})
}

// TestRunInTxRepeatableRead: under REPEATABLE READ, PostgreSQL fails a
// transaction that waited on the fence row behind a newer one with a
// serialization failure (40001) before its function runs; RunInTx begins
// it again, and it is then refused as stale. No transaction may see
// ErrRetryable, and the ledger stays in token order. The control, with
// WithRetries(0), shows the serialization failures reaching the caller.
func TestRunInTxRepeatableRead(t *testing.T) {
	rr := sqlfence.WithTxOptions(sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	for _, srv := range []server{servers[0], servers[3]} {
		t.Run(srv.name, func(t *testing.T) {
			db, f := newLedger(t, srv)
			for w, err := range raceTx(t, srv, db, f, 8, false, rr) {
				if err != nil && (w == 7 || !errors.Is(err, fence.ErrStale)) {
					t.Errorf("RunInTx with token %d: got %v, want nil or fence.ErrStale (nil for the highest)", w+1, err)
				}
			}
			toks := ledger(t, db)
			for i := 1; i < len(toks); i++ {
				if toks[i] < toks[i-1] {
					t.Fatalf("ledger %v: token %d committed after %d", toks, toks[i], toks[i-1])
				}
			}
			if srv.d != sqlfence.PostgreSQL {
				return // InnoDB's fence UPDATE reads the newest row: no conflict
			}
			bareDB, bare := newLedger(t, srv, sqlfence.WithRetries(0))
			// Races until one shows a serialization failure, 50 at most: on
			// a loaded machine 5 races once showed none (CI, 2026-12-02).
			failed := 0
			for round := 0; failed == 0 && round < 50; round++ {
				for _, err := range raceTx(t, srv, bareDB, bare, 8, false, rr) {
					if errors.Is(err, sqlfence.ErrRetryable) {
						failed++
					}
				}
			}
			if failed == 0 {
				t.Errorf("control, WithRetries(0): no transaction failed with ErrRetryable, want serialization failures")
			}
		})
	}
}

// A function that commits the fenced transaction itself gets an error that
// says the outcome is not known (its writes did land), not one that says
// nothing was sent; one that rolls it back gets the same, and nothing
// landed.
func TestRunInTxFunctionEndsTx(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newLedger(t, srv)
		ctx := t.Context()
		err := f.RunInTx(ctx, db, "r", 3, func(tx *sql.Tx) error {
			if err := appendLedger(ctx, srv, tx, 3, "self-committed"); err != nil {
				return err
			}
			return tx.Commit()
		})
		if !errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrInvalidArgument) {
			t.Fatalf("RunInTx whose function committed: got %v, want fence.ErrUnknownOutcome and not ErrInvalidArgument", err)
		}
		if got := fmt.Sprint(ledger(t, db)); got != "[3]" {
			t.Fatalf("ledger after the function's own commit: got %s, want [3]", got)
		}
		err = f.RunInTx(ctx, db, "r", 4, func(tx *sql.Tx) error {
			if err := appendLedger(ctx, srv, tx, 4, "rolled back"); err != nil {
				return err
			}
			return tx.Rollback()
		})
		if !errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("RunInTx whose function rolled back: got %v, want fence.ErrUnknownOutcome", err)
		}
		if got := fmt.Sprint(ledger(t, db)); got != "[3]" {
			t.Fatalf("ledger after the function's own rollback: got %s, want [3]", got)
		}
		fencewant.Stale(t, f.RunInTx(ctx, db, "r", 2, func(*sql.Tx) error { return nil }), 2, 3)
	})
}
