package sqlcbank_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	sqlcbank "github.com/fencelock/fencelock/docs/sqlc"
	"github.com/fencelock/fencelock/docs/sqlc/db"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// A context that has ended already sends nothing: each function fails
// with the context's error, not fence.ErrUnknownOutcome (nothing to read
// back), through a pool, a connection and Withdraw.
func TestEndedContext(t *testing.T) {
	pool := newBank(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"SetBalance on a pool", func() error { return sqlcbank.SetBalance(ctx, db.New(pool), 5, "acct-A", 1) }},
		{"SetBalance on a conn", func() error { return sqlcbank.SetBalance(ctx, db.New(conn.Conn()), 5, "acct-A", 1) }},
		{"Put on a pool", func() error { return sqlcbank.Put(ctx, db.New(pool), 5, "acct-A", 1) }},
		{"Claim on a pool", func() error { _, err := sqlcbank.Claim(ctx, db.New(pool), 5, "acct-A"); return err }},
		{"Withdraw on a pool", func() error { return sqlcbank.Withdraw(ctx, pool, 5, "acct-A", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, context.Canceled) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("got %v, want context.Canceled and no unknown outcome", err)
			}
		})
	}
	wantAccount(t, pool, "acct-A", 1000, 0)
}

// A COMMIT that the server turned into a ROLLBACK (the transaction had
// failed) is a known failure: nothing landed.
func TestWriteErrorCommitRollback(t *testing.T) {
	pool := newBank(t)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "SELECT 1/0"); err == nil {
		t.Fatal("want division by zero")
	}
	cerr := tx.Commit(t.Context())
	if !errors.Is(cerr, pgx.ErrTxCommitRollback) {
		t.Fatalf("commit: got %v, want pgx.ErrTxCommitRollback", cerr)
	}
	if err := postgres.WriteError("acct-A", 5, cerr); err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("WriteError of a commit rolled back: got %v, want a known failure", err)
	}
}
