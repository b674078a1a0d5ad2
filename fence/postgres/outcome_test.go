package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

func wantKnownFailure(t *testing.T, err error) {
	t.Helper()
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("got error %v, want a failure not matching fence.ErrUnknownOutcome", err)
	}
}

// killBackend terminates the session of tx from another connection and
// waits until it is gone.
func killBackend(t *testing.T, pool *pgxpool.Pool, tx pgx.Tx) {
	t.Helper()
	ctx := t.Context()
	var pid int32
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, "SELECT pg_terminate_backend($1)", pid)
	poll.Until(t, "the terminated backend to exit", func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
		return err == nil && n == 0
	})
}

// TestRunInTxBackendKilled kills the transaction's session after fn's
// writes: the COMMIT cannot be answered, so the outcome is unknown. The
// control kills it before fn's last statement: that statement fails, COMMIT
// is never sent, and the failure is a known one.
func TestRunInTxBackendKilled(t *testing.T) {
	tests := []struct {
		name     string
		killLast bool // kill after fn's writes, so COMMIT is what fails
	}{
		{"during commit", true},
		{"before the last write (control)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := newLedger(t)
			ctx := t.Context()
			err := postgres.RunInTx(ctx, pool, "r", 7, func(tx pgx.Tx) error {
				if !tt.killLast {
					killBackend(t, pool, tx)
				}
				if err := appendLedger(ctx, tx, "r", 7, "A"); err != nil {
					return err
				}
				if tt.killLast {
					killBackend(t, pool, tx)
				}
				return nil
			})
			if tt.killLast {
				fencewant.Unknown(t, err, 7)
			} else {
				wantKnownFailure(t, err)
			}
			// The session died before COMMIT reached it: nothing landed.
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 0 {
				t.Fatalf("ledger rows: got %d (%v), want 0", n, err)
			}
		})
	}
}

// holdRow locks account id in a transaction until release is called.
func holdRow(t *testing.T, pool *pgxpool.Pool, id string) (release func()) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(context.Background()) }
}

// TestUpdateCancelledWhileWaiting cancels a fenced update while it waits on
// a row lock: it was sent, so its outcome is unknown, and the row then holds
// the old data or the new, whole. The control cancels before the call.
func TestUpdateCancelledWhileWaiting(t *testing.T) {
	pool, tbl := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 1)")
	release := holdRow(t, pool, "a")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- tbl.Update(ctx, pool, "a", 2, postgres.Set("balance", 2)) }()
	waitLockWaiters(t, pool, 1)
	cancel()
	err := <-errc
	release()
	fencewant.Unknown(t, err, 2)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want it to wrap context.Canceled", err)
	}
	b, f, _ := account(t, pool, "a")
	if (b != 1 || f != 1) && (b != 2 || f != 2) {
		t.Fatalf("account after the cancelled update: got balance %d fence %d, want 1/1 or 2/2", b, f)
	}

	err = tbl.Update(cancelled(t), pool, "a", 3, postgres.Set("balance", 3))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context: got %v, want context.Canceled", err)
	}
	wantKnownFailure(t, err)
}

// TestExecCancelledWhileWaiting cancels a one-statement fenced write while
// it waits for the fence held by a fenced transaction.
func TestExecCancelledWhileWaiting(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	var execErr error
	err := postgres.RunInTx(ctx, pool, "r", 1, func(pgx.Tx) error {
		ectx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := postgres.Exec(ectx, pool, "r", 2, setLatest, "r", 2, "exec")
			errc <- err
		}()
		waitLockWaiters(t, pool, 1)
		cancel()
		execErr = <-errc
		return nil
	})
	if err != nil {
		t.Fatalf("holder: got %v, want nil", err)
	}
	fencewant.Unknown(t, execErr, 2)
}

// TestCommitCancelledBeforeSend: a context that ends inside fn, before
// COMMIT is sent, is a known failure: nothing was committed.
func TestCommitCancelledBeforeSend(t *testing.T) {
	pool := newLedger(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := postgres.RunInTx(ctx, pool, "r", 1, func(tx pgx.Tx) error {
		err := appendLedger(ctx, tx, "r", 1, "A")
		cancel()
		return err
	})
	wantKnownFailure(t, err)
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 0 {
		t.Fatalf("ledger rows: got %d (%v), want 0", n, err)
	}
}
