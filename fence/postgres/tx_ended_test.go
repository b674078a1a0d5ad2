package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// TestRunInTxFnEndsTx: fn must leave the transaction to RunInTx. If it
// commits or rolls back itself, RunInTx cannot tell which it did: the error
// matches fence.ErrUnknownOutcome, not ErrInvalidArgument (which says
// nothing was sent), and names the misuse. A Commit of fn's landed.
func TestRunInTxFnEndsTx(t *testing.T) {
	tests := []struct {
		name   string
		end    func(context.Context, pgx.Tx) error
		landed int
	}{
		{"Commit", func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }, 1},
		{"Rollback", func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := newLedger(t)
			ctx := t.Context()
			err := postgres.RunInTx(ctx, pool, "r", 1, func(tx pgx.Tx) error {
				if err := appendLedger(ctx, tx, "r", 1, "fn"); err != nil {
					return err
				}
				return tt.end(ctx, tx)
			})
			if !errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, postgres.ErrInvalidArgument) {
				t.Fatalf("RunInTx whose fn called %s: got %v, want fence.ErrUnknownOutcome, not postgres.ErrInvalidArgument", tt.name, err)
			}
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != tt.landed {
				t.Fatalf("ledger rows after fn's own %s: got %d, %v; want %d", tt.name, n, err, tt.landed)
			}
		})
	}
}
