package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestLostConnectionInCallersTx: a write through the caller's own
// transaction whose connection broke is a definite failure, not an unknown
// outcome: that transaction can no longer commit, so nothing it did lands.
func TestLostConnectionInCallersTx(t *testing.T) {
	const raw = "UPDATE accounts SET balance = $2 WHERE id = $1"
	tests := []struct {
		name  string
		write func(context.Context, pgx.Tx, *postgres.Table) error
	}{
		{"Table.Update", func(ctx context.Context, tx pgx.Tx, tbl *postgres.Table) error {
			return tbl.Update(ctx, tx, "a", 2, postgres.Set("balance", 2))
		}},
		{"Table.Upsert", func(ctx context.Context, tx pgx.Tx, tbl *postgres.Table) error {
			return tbl.Upsert(ctx, tx, "a", 2, postgres.Set("balance", 2))
		}},
		{"Exec", func(ctx context.Context, tx pgx.Tx, _ *postgres.Table) error {
			_, err := postgres.Exec(ctx, tx, "a", 2, raw, "a", 2)
			return err
		}},
		{"Fences.Advance", func(ctx context.Context, tx pgx.Tx, _ *postgres.Table) error {
			fences, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable})
			if err != nil {
				return err
			}
			return fences.Advance(ctx, tx, "a", 2)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl := newAccounts(t)
			ctx := t.Context()
			if err := postgres.CreateSchema(ctx, pool); err != nil {
				t.Fatal(err)
			}
			mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 1)")
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			killBackend(t, pool, tx)
			wantKnownFailure(t, tt.write(ctx, tx, tbl))
			wantAccount(t, pool, "a", 1, 1)
		})
	}
}

// TestAdvanceCancelledWhileWaiting: Advance outside a transaction commits
// by itself, so when ctx ends while it waits on the fence its outcome is
// unknown, as for every other one-statement write.
func TestAdvanceCancelledWhileWaiting(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	fences, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	var advanceErr error
	err = postgres.RunInTx(ctx, pool, "r", 1, func(pgx.Tx) error {
		actx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- fences.Advance(actx, pool, "r", 2) }()
		waitLockWaiters(t, pool, 1)
		cancel()
		advanceErr = <-errc
		return nil
	})
	if err != nil {
		t.Fatalf("holder: got %v, want nil", err)
	}
	fencewant.Unknown(t, advanceErr, 2)
}

// TestRunInTxSavepointConnectionLost: RunInTx on the caller's pgx.Tx ends
// with a RELEASE SAVEPOINT, which commits nothing; when the connection
// breaks there, the failure is a definite one.
func TestRunInTxSavepointConnectionLost(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	outer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Rollback(ctx)
	err = postgres.RunInTx(ctx, outer, "r", 1, func(tx pgx.Tx) error {
		if err := appendLedger(ctx, tx, "r", 1, "A"); err != nil {
			return err
		}
		killBackend(t, pool, tx)
		return nil
	})
	wantKnownFailure(t, err)
}
