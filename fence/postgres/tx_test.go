package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

var levels = []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable}

// newLedger returns a pool on a fresh database with the default fence table
// and a table ledger (id bigserial, token, writer) that fenced transactions
// append to.
func newLedger(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	if err := postgres.CreateSchema(t.Context(), pool); err != nil {
		t.Fatalf("CreateSchema: got %v, want nil", err)
	}
	mustExec(t, pool, "CREATE TABLE ledger (id bigserial PRIMARY KEY, token bigint NOT NULL, writer text NOT NULL)")
	mustExec(t, pool, "CREATE TABLE latest (resource text PRIMARY KEY, token bigint NOT NULL, writer text NOT NULL)")
	return pool
}

// appendLedger is the transaction body of the tests: two writes that must
// land together or not at all.
func appendLedger(ctx context.Context, tx pgx.Tx, res string, tok fence.Token, writer string) error {
	if _, err := tx.Exec(ctx, "INSERT INTO ledger (token, writer) VALUES ($1, $2)", int64(tok), writer); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO latest (resource, token, writer) VALUES ($1, $2, $3)
		ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, writer = EXCLUDED.writer`, res, int64(tok), writer)
	return err
}

func latestWriter(t *testing.T, db postgres.DB, res string) string {
	t.Helper()
	var w string
	if err := db.QueryRow(t.Context(), "SELECT writer FROM latest WHERE resource = $1", res).Scan(&w); err != nil {
		t.Fatalf("reading latest writer of %q: %v", res, err)
	}
	return w
}

func TestRunInTxStale(t *testing.T) {
	for _, iso := range levels {
		t.Run(string(iso), func(t *testing.T) {
			pool := newLedger(t)
			ctx := t.Context()
			run := func(tok fence.Token, writer string) (bool, error) {
				called := false
				err := postgres.RunInTx(ctx, pool, "invoice-42", tok, func(tx pgx.Tx) error {
					called = true
					return appendLedger(ctx, tx, "invoice-42", tok, writer)
				}, postgres.WithIsolation(iso))
				return called, err
			}
			if _, err := run(34, "B"); err != nil {
				t.Fatalf("RunInTx(token 34): got %v, want nil", err)
			}
			called, err := run(33, "A")
			fencewant.Stale(t, err, 33, 34)
			if called {
				t.Error("RunInTx with a stale token called fn: want it refused before")
			}
			if _, err := run(34, "B2"); err != nil {
				t.Fatalf("RunInTx(token 34) again: got %v, want nil", err)
			}
			if got := latestWriter(t, pool, "invoice-42"); got != "B2" {
				t.Fatalf("latest writer: got %q, want %q", got, "B2")
			}
			if tok, err := defaultFences(t).Current(ctx, pool, "invoice-42"); err != nil || tok != 34 {
				t.Fatalf("Current: got %d, %v, want 34, nil", tok, err)
			}
		})
	}
}

// TestRunInTxStaleControl: the same two transactions without the fence;
// the late one lands over the newer holder's writes.
func TestRunInTxStaleControl(t *testing.T) {
	pool := newLedger(t)
	ctx := t.Context()
	for _, w := range []struct {
		tok    fence.Token
		writer string
	}{{34, "B"}, {33, "A"}} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return appendLedger(ctx, tx, "invoice-42", w.tok, w.writer) })
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := latestWriter(t, pool, "invoice-42"); got != "A" {
		t.Fatalf("latest writer without fencing: got %q, want the stale %q to have landed", got, "A")
	}
}

// TestRunInTxOptions: the options reach the server's transaction, a later
// WithIsolation overriding WithTxOptions' level.
func TestRunInTxOptions(t *testing.T) {
	pool := newLedger(t)
	tests := []struct {
		name string
		opts []postgres.TxOption
		want string
	}{
		{name: "none", want: "read committed/off"},
		{name: "WithTxOptions", opts: []postgres.TxOption{postgres.WithTxOptions(pgx.TxOptions{
			IsoLevel: pgx.Serializable, AccessMode: pgx.ReadWrite, DeferrableMode: pgx.Deferrable})}, want: "serializable/on"},
		{name: "WithIsolation after WithTxOptions", opts: []postgres.TxOption{
			postgres.WithTxOptions(pgx.TxOptions{IsoLevel: pgx.Serializable}), postgres.WithIsolation(pgx.RepeatableRead)},
			want: "repeatable read/off"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			err := postgres.RunInTx(t.Context(), pool, "r", fence.Token(i+1), func(tx pgx.Tx) error {
				return tx.QueryRow(t.Context(), "SELECT current_setting('transaction_isolation') || '/' || current_setting('transaction_deferrable')").Scan(&got)
			}, tt.opts...)
			if err != nil || got != tt.want {
				t.Fatalf("RunInTx: got %q, %v, want %q, nil", got, err, tt.want)
			}
		})
	}
}

func TestRunInTxFnError(t *testing.T) {
	pool := newLedger(t)
	boom := errors.New("boom")
	err := postgres.RunInTx(t.Context(), pool, "r", 5, func(tx pgx.Tx) error {
		if err := appendLedger(t.Context(), tx, "r", 5, "A"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("RunInTx: got %v, want fn's error", err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 0 {
		t.Fatalf("ledger rows after fn failed: got %d (%v), want 0", n, err)
	}
	if _, err := defaultFences(t).Current(t.Context(), pool, "r"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("fence after fn failed: got %v, want fence.ErrNotFound (the advance rolled back)", err)
	}
}

func TestRunInTxPanic(t *testing.T) {
	pool := newLedger(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = postgres.RunInTx(t.Context(), pool, "r", 5, func(tx pgx.Tx) error {
			_ = appendLedger(t.Context(), tx, "r", 5, "A")
			panic("boom")
		})
	}()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 0 {
		t.Fatalf("ledger rows after fn panicked: got %d (%v), want 0", n, err)
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Fatalf("acquired connections after the panic: got %d, want 0", st.AcquiredConns())
	}
}

// TestRunInTxConcurrent races fenced transactions with different tokens on
// one resource. Each appends its token to the ledger; since the fence
// serialises them, the ledger, in insertion order, must never go down,
// and the highest token must never be refused.
func TestRunInTxConcurrent(t *testing.T) {
	for _, iso := range levels {
		t.Run(string(iso), func(t *testing.T) {
			pool := newLedger(t)
			const writers, rounds = 6, 8
			start := make(chan struct{})
			errs := make(chan error, writers*rounds)
			var wg sync.WaitGroup
			for w := range writers {
				tok := fence.Token(w + 1)
				wg.Go(func() {
					<-start
					for r := range rounds {
						err := runRetrying(t.Context(), pool, tok, fmt.Sprintf("w%d-%d", tok, r), iso)
						// A lower token may also find its transaction ended
						// by a newer one it blocked (preemption: ErrTerminated,
						// nothing written), when it ran slowly enough, as
						// under -race on a loaded machine.
						older := errors.Is(err, fence.ErrStale) || errors.Is(err, postgres.ErrTerminated)
						if err != nil && (!older || tok == writers) {
							errs <- fmt.Errorf("token %d: %w", tok, err)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("got %v, want nil, fence.ErrStale or postgres.ErrTerminated (nil for the highest token)", err)
			}
			wantLedgerMonotonic(t, pool, writers)
		})
	}
}

// runRetrying runs one fenced ledger append, again while it fails with
// ErrRetryable.
func runRetrying(ctx context.Context, pool *pgxpool.Pool, tok fence.Token, writer string, iso pgx.TxIsoLevel) error {
	for attempt := 0; ; attempt++ {
		err := postgres.RunInTx(ctx, pool, "hot", tok, func(tx pgx.Tx) error {
			return appendLedger(ctx, tx, "hot", tok, writer)
		}, postgres.WithIsolation(iso))
		if !errors.Is(err, postgres.ErrRetryable) || attempt == 100 {
			return err
		}
		if errors.Is(err, fence.ErrStale) {
			return fmt.Errorf("error matches both ErrRetryable and ErrStale: %w", err)
		}
	}
}

func defaultFences(t *testing.T) *postgres.Fences {
	t.Helper()
	f, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func wantLedgerMonotonic(t *testing.T, pool *pgxpool.Pool, highest int64) {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT token FROM ledger ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(toks); i++ {
		if toks[i] < toks[i-1] {
			t.Fatalf("ledger went down at row %d: token %d after %d (ledger %v)", i, toks[i], toks[i-1], toks)
		}
	}
	if len(toks) == 0 || toks[len(toks)-1] != highest {
		t.Fatalf("last ledger token: got %v, want %d", toks, highest)
	}
}
