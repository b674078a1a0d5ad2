package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

const setLatest = `INSERT INTO latest (resource, token, writer) VALUES ($1, $2, $3)
	ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, writer = EXCLUDED.writer`

func TestExec(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	exec := func(tok fence.Token, writer string) (int64, error) {
		return postgres.Exec(ctx, pool, "invoice-42", tok, setLatest+";", "invoice-42", int64(tok), writer)
	}
	if n, err := exec(34, "B"); err != nil || n != 1 {
		t.Fatalf("Exec(token 34): got %d, %v, want 1, nil", n, err)
	}
	_, err := exec(33, "A")
	fencewant.Stale(t, err, 33, 34)
	if got := latestWriter(t, pool, "invoice-42"); got != "B" {
		t.Fatalf("latest writer after a refused Exec: got %q, want %q", got, "B")
	}
	if n, err := exec(34, "B2"); err != nil || n != 1 {
		t.Fatalf("Exec(token 34) again: got %d, %v, want 1, nil", n, err)
	}
	n, err := postgres.Exec(ctx, pool, "invoice-42", 35, "UPDATE latest SET writer = 'C' WHERE resource = 'nope'")
	if err != nil || n != 0 {
		t.Fatalf("Exec matching no row: got %d, %v, want 0, nil (not stale)", n, err)
	}
	if tok, err := defaultFences(t).Current(ctx, pool, "invoice-42"); err != nil || tok != 35 {
		t.Fatalf("fence after Exec(token 35): got %d, %v, want 35, nil", tok, err)
	}
}

// TestExecControl: the same statements without the guard; the late one
// lands.
func TestExecControl(t *testing.T) {
	pool := newLedger(t)
	mustExec(t, pool, setLatest, "invoice-42", 34, "B")
	mustExec(t, pool, setLatest, "invoice-42", 33, "A")
	if got := latestWriter(t, pool, "invoice-42"); got != "A" {
		t.Fatalf("latest writer without fencing: got %q, want the stale %q", got, "A")
	}
}

func TestExecInTxStaleAborts(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	if _, err := postgres.Exec(ctx, pool, "r", 9, setLatest, "r", 9, "B"); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = postgres.Exec(ctx, tx, "r", 8, setLatest, "r", 8, "A")
	fencewant.Stale(t, err, 8, 0) // the aborted transaction cannot read the current token
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("Commit after a refused Exec: got %v, want pgx.ErrTxCommitRollback", err)
	}
	if got := latestWriter(t, pool, "r"); got != "B" {
		t.Fatalf("latest writer: got %q, want %q", got, "B")
	}
}

// TestExecConcurrent mixes one-statement writes and fenced transactions
// on one resource: the ledger must never go down.
func TestExecConcurrent(t *testing.T) {
	for _, iso := range levels {
		t.Run(string(iso), func(t *testing.T) {
			pool := newLedger(t)
			const writers, rounds = 6, 8
			var wg sync.WaitGroup
			errs := make(chan error, writers*rounds)
			for w := range writers {
				tok := fence.Token(w + 1)
				wg.Go(func() {
					for r := range rounds {
						var err error
						if (w+r)%2 == 0 {
							err = runRetrying(t.Context(), pool, tok, "tx", iso)
						} else {
							_, err = postgres.Exec(t.Context(), pool, "hot", tok,
								"INSERT INTO ledger (token, writer) VALUES ($1, 'exec')", int64(tok))
						}
						if err != nil && (!errors.Is(err, fence.ErrStale) || tok == writers) {
							errs <- fmt.Errorf("token %d: %w", tok, err)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("got %v, want nil or fence.ErrStale (nil for the highest token)", err)
			}
			wantLedgerMonotonic(t, pool, writers)
		})
	}
}

func TestExecInvalidInput(t *testing.T) {
	tests := []struct {
		name     string
		db       postgres.DB
		resource string
		token    fence.Token
		sql      string
		want     error
	}{
		{"nil DB", nil, "r", 1, "DELETE FROM t", postgres.ErrInvalidArgument},
		{"empty resource", noIO{t}, "", 1, "DELETE FROM t", fence.ErrInvalidKey},
		{"zero token", noIO{t}, "r", 0, "DELETE FROM t", fence.ErrInvalidToken},
		{"empty statement", noIO{t}, "r", 1, " ; ", postgres.ErrInvalidArgument},
		{"select", noIO{t}, "r", 1, "SELECT 1", postgres.ErrInvalidArgument},
		{"two statements", noIO{t}, "r", 1, "DROP TABLE t; DELETE FROM t", postgres.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := postgres.Exec(t.Context(), tt.db, tt.resource, tt.token, tt.sql); !errors.Is(err, tt.want) {
				t.Fatalf("Exec: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
}

func TestRunInTxInvalidInput(t *testing.T) {
	fn := func(pgx.Tx) error { return nil }
	tests := []struct {
		name     string
		db       postgres.TxBeginner
		resource string
		token    fence.Token
		fn       func(pgx.Tx) error
		opts     []postgres.TxOption
		want     error
	}{
		{"nil DB", nil, "r", 1, fn, nil, postgres.ErrInvalidArgument},
		{"nil fn", noIO{t}, "r", 1, nil, nil, postgres.ErrInvalidArgument},
		{"empty resource", noIO{t}, "", 1, fn, nil, fence.ErrInvalidKey},
		{"zero token", noIO{t}, "r", 0, fn, nil, fence.ErrInvalidToken},
		{"bad isolation", noIO{t}, "r", 1, fn, []postgres.TxOption{postgres.WithIsolation("chaos")}, postgres.ErrInvalidOption},
		{"nil option", noIO{t}, "r", 1, fn, []postgres.TxOption{nil}, postgres.ErrInvalidOption},
		{"isolation on a savepoint", noIO{t}, "r", 1, fn, []postgres.TxOption{postgres.WithIsolation(pgx.Serializable)}, postgres.ErrInvalidOption},
		{"read only", noIO{t}, "r", 1, fn, []postgres.TxOption{postgres.WithTxOptions(pgx.TxOptions{AccessMode: pgx.ReadOnly})}, postgres.ErrInvalidOption},
		{"bad deferrable mode", noIO{t}, "r", 1, fn, []postgres.TxOption{postgres.WithTxOptions(pgx.TxOptions{DeferrableMode: "later"})}, postgres.ErrInvalidOption},
		{"zero preempt wait", noIO{t}, "r", 1, fn, []postgres.TxOption{postgres.WithPreemptAfter(0)}, postgres.ErrInvalidOption},
		{"negative preempt wait", noIO{t}, "r", 1, fn, []postgres.TxOption{postgres.WithPreemptAfter(-time.Second)}, postgres.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := postgres.RunInTx(t.Context(), tt.db, tt.resource, tt.token, tt.fn, tt.opts...); !errors.Is(err, tt.want) {
				t.Fatalf("RunInTx: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	if err := postgres.RunInTx(cancelled(t), noIO{t}, "r", 1, fn); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunInTx with a cancelled context: got %v, want context.Canceled", err)
	}
}

// TestExecLocksFenceFirst checks that a one-statement write takes the fence
// row before touching its own rows, as a fenced transaction does: while it
// waits for the fence, its target row must still be free.
func TestExecLocksFenceFirst(t *testing.T) {
	pool := newLedger(t)
	mustExec(t, pool, "CREATE TABLE pair (id text PRIMARY KEY, n int NOT NULL)")
	mustExec(t, pool, "INSERT INTO pair VALUES ('a', 0)")
	ctx := t.Context()
	execErr := make(chan error, 1)
	err := postgres.RunInTx(ctx, pool, "r", 1, func(pgx.Tx) error {
		go func() {
			_, err := postgres.Exec(ctx, pool, "r", 2, "UPDATE pair SET n = n + 1 WHERE id = 'a'")
			execErr <- err
		}()
		waitLockWaiters(t, pool, 1)
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT 1 FROM pair WHERE id = 'a' FOR UPDATE NOWAIT")
			return err
		})
	})
	if err != nil {
		t.Fatalf("locking the target row while Exec waits on the fence: got %v, want nil", err)
	}
	if err := <-execErr; err != nil {
		t.Fatalf("Exec: got %v, want nil", err)
	}
}
