package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// TestRunInTxWaitsOnFence has one fenced transaction hold the fence while a
// second on the same resource waits for it. A waiter that is newer lands
// after the holder under READ COMMITTED; an older one is refused as stale.
// Under REPEATABLE READ and SERIALIZABLE the waiter cannot see the holder's
// commit and must fail with ErrRetryable (never stale, never success); run
// again, it gets the READ COMMITTED answer.
func TestRunInTxWaitsOnFence(t *testing.T) {
	tests := []struct {
		name           string
		holder, waiter fence.Token
		firstUse       bool // no fence row before the two
		wantRC         error
		wantLatest     string
	}{
		{"newer waits behind older", 5, 6, false, nil, "waiter"},
		{"older waits behind newer", 6, 5, false, fence.ErrStale, "holder"},
		{"newer waits behind older, first use", 5, 6, true, nil, "waiter"},
		{"older waits behind newer, first use", 6, 5, true, fence.ErrStale, "holder"},
	}
	for _, iso := range levels {
		t.Run(string(iso), func(t *testing.T) {
			pool := newLedger(t)
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					res := fmt.Sprintf("res-%d", i)
					if !tt.firstUse {
						runOnce(t, pool, res, 1, "setup", iso)
					}
					err := holdWhileWaiting(t, pool, res, tt.holder, tt.waiter, iso)
					want := tt.wantRC
					if iso != pgx.ReadCommitted {
						want = postgres.ErrRetryable
					}
					checkWaiter(t, err, want)
					if want == postgres.ErrRetryable {
						checkWaiter(t, runLedger(t.Context(), pool, res, tt.waiter, "waiter", iso), tt.wantRC)
					}
					if got := latestWriter(t, pool, res); got != tt.wantLatest {
						t.Fatalf("latest writer: got %q, want %q", got, tt.wantLatest)
					}
				})
			}
		})
	}
}

func checkWaiter(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("waiter: got %v, want nil", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("waiter: got %v, want an error matching %v", err, want)
	case want == postgres.ErrRetryable && errors.Is(err, fence.ErrStale):
		t.Fatalf("waiter: got %v, which matches fence.ErrStale too", err)
	case want == postgres.ErrRetryable:
		wantPgCode(t, err, "40001")
	}
}

func runLedger(ctx context.Context, pool *pgxpool.Pool, res string, tok fence.Token, writer string, iso pgx.TxIsoLevel) error {
	return postgres.RunInTx(ctx, pool, res, tok, func(tx pgx.Tx) error {
		return appendLedger(ctx, tx, res, tok, writer)
	}, postgres.WithIsolation(iso))
}

func runOnce(t *testing.T, pool *pgxpool.Pool, res string, tok fence.Token, writer string, iso pgx.TxIsoLevel) {
	t.Helper()
	if err := runLedger(t.Context(), pool, res, tok, writer, iso); err != nil {
		t.Fatalf("RunInTx(%s, token %d): got %v, want nil", res, tok, err)
	}
}

// holdWhileWaiting runs a fenced transaction with token holder that, once
// it holds the fence, starts one with token waiter, waits until that one
// blocks on the fence row, and commits. It returns the waiter's error.
func holdWhileWaiting(t *testing.T, pool *pgxpool.Pool, res string, holder, waiter fence.Token, iso pgx.TxIsoLevel) error {
	t.Helper()
	ctx := t.Context()
	waiterErr := make(chan error, 1)
	err := postgres.RunInTx(ctx, pool, res, holder, func(tx pgx.Tx) error {
		go func() { waiterErr <- runLedger(ctx, pool, res, waiter, "waiter", iso) }()
		waitLockWaiters(t, pool, 1)
		return appendLedger(ctx, tx, res, holder, "holder")
	}, postgres.WithIsolation(iso))
	if err != nil {
		t.Fatalf("holder: got %v, want nil", err)
	}
	return <-waiterErr
}

// TestSerializationFailure provokes a real serialization failure: two
// SERIALIZABLE fenced transactions, on different resources, each read
// who is on call and take one doctor off (write skew). One must fail with
// ErrRetryable wrapping SQLSTATE 40001, and one doctor stays on call. The
// control runs the same under READ COMMITTED: both commit and nobody is
// left on call.
func TestSerializationFailure(t *testing.T) {
	tests := []struct {
		iso        pgx.TxIsoLevel
		wantFailed int
		wantOnCall int
	}{
		{pgx.Serializable, 1, 1},
		{pgx.ReadCommitted, 0, 0}, // control
	}
	for _, tt := range tests {
		t.Run(string(tt.iso), func(t *testing.T) {
			pool := newLedger(t)
			mustExec(t, pool, "CREATE TABLE oncall (doctor text PRIMARY KEY, on_call bool NOT NULL)")
			mustExec(t, pool, "INSERT INTO oncall VALUES ('alice', true), ('bob', true)")
			errs := writeSkew(t, pool, tt.iso)
			failed := 0
			for _, err := range errs {
				if err == nil {
					continue
				}
				failed++
				if !errors.Is(err, postgres.ErrRetryable) || errors.Is(err, fence.ErrStale) {
					t.Fatalf("got %v, want an error matching postgres.ErrRetryable and not fence.ErrStale", err)
				}
				wantPgCode(t, err, "40001")
			}
			var onCall int
			if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM oncall WHERE on_call").Scan(&onCall); err != nil {
				t.Fatal(err)
			}
			if failed != tt.wantFailed || onCall != tt.wantOnCall {
				t.Fatalf("got %d failed (%v) and %d on call, want %d failed and %d on call", failed, errs, onCall, tt.wantFailed, tt.wantOnCall)
			}
		})
	}
}

// writeSkew runs the two transactions of TestSerializationFailure, both
// reading before either writes.
func writeSkew(t *testing.T, pool *pgxpool.Pool, iso pgx.TxIsoLevel) [2]error {
	t.Helper()
	ctx := t.Context()
	read := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var errs [2]error
	done := make(chan struct{}, 2)
	for i, doctor := range []string{"alice", "bob"} {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = postgres.RunInTx(ctx, pool, "shift-"+doctor, 1, func(tx pgx.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, "SELECT count(*) FROM oncall WHERE on_call").Scan(&n); err != nil {
					return err
				}
				close(read[i])
				<-read[1-i]
				if n < 2 {
					return nil
				}
				_, err := tx.Exec(ctx, "UPDATE oncall SET on_call = false WHERE doctor = $1", doctor)
				return err
			}, postgres.WithIsolation(iso))
		}()
	}
	<-done
	<-done
	return errs
}

// TestDeadlockRetryable has two fenced transactions lock two rows in
// opposite orders. PostgreSQL breaks the deadlock by failing one with
// SQLSTATE 40P01, which must match ErrRetryable; the other commits.
func TestDeadlockRetryable(t *testing.T) {
	pool := newLedger(t)
	mustExec(t, pool, "CREATE TABLE pair (id text PRIMARY KEY, n int NOT NULL)")
	mustExec(t, pool, "INSERT INTO pair VALUES ('a', 0), ('b', 0)")
	ctx := t.Context()
	locked := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	errs := make(chan error, 2)
	for i, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		go func() {
			errs <- postgres.RunInTx(ctx, pool, "res-"+order[0], 1, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "UPDATE pair SET n = n + 1 WHERE id = $1", order[0]); err != nil {
					return err
				}
				close(locked[i])
				<-locked[1-i]
				_, err := tx.Exec(ctx, "UPDATE pair SET n = n + 1 WHERE id = $1", order[1])
				return err
			})
		}()
	}
	var failed []error
	for range 2 {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("got errors %v, want exactly one", failed)
	}
	if !errors.Is(failed[0], postgres.ErrRetryable) || errors.Is(failed[0], fence.ErrStale) {
		t.Fatalf("got %v, want an error matching postgres.ErrRetryable and not fence.ErrStale", failed[0])
	}
	wantPgCode(t, failed[0], "40P01")
}
