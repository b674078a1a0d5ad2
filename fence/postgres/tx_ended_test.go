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
// commits or rolls back itself, RunInTx says so clearly, as a misuse, not as
// an unknown outcome.
func TestRunInTxFnEndsTx(t *testing.T) {
	tests := []struct {
		name string
		end  func(context.Context, pgx.Tx) error
	}{
		{"Commit", func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }},
		{"Rollback", func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }},
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
			if !errors.Is(err, postgres.ErrInvalidArgument) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("RunInTx whose fn called %s: got %v, want postgres.ErrInvalidArgument, not fence.ErrUnknownOutcome", tt.name, err)
			}
		})
	}
}
