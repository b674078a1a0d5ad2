package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// TestExecSeesTheHolderItWaitedFor: holder 10 inserts a row in a fenced
// transaction; while it holds the fence, a write with token 11 starts and
// waits for it. Under READ COMMITTED the write must see the row holder 10
// committed, as a fenced transaction does: a DELETE removes it, an INSERT …
// SELECT copies it. The control puts the guard in a CTE of the write's own
// statement, whose snapshot is taken before the wait: it misses the row.
func TestExecSeesTheHolderItWaitedFor(t *testing.T) {
	const (
		del  = "DELETE FROM items WHERE res = $1"
		copy = "INSERT INTO copies (res, v) SELECT res, v FROM items WHERE res = $1"
	)
	writers := []struct {
		name  string
		write func(ctx context.Context, pool *pgxpool.Pool, res, sql string) (int64, error)
		want  int64
	}{
		{"Exec", func(ctx context.Context, pool *pgxpool.Pool, res, sql string) (int64, error) {
			return postgres.Exec(ctx, pool, res, 11, sql, res)
		}, 1},
		{"RunInTx", func(ctx context.Context, pool *pgxpool.Pool, res, sql string) (n int64, err error) {
			err = postgres.RunInTx(ctx, pool, res, 11, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, sql, res)
				n = tag.RowsAffected()
				return err
			})
			return n, err
		}, 1},
		{"control, guard in the statement's CTE", func(ctx context.Context, pool *pgxpool.Pool, res, sql string) (int64, error) {
			tag, err := pool.Exec(ctx, `WITH guard AS (INSERT INTO fencelock_fences AS cur (resource, token) VALUES ($1, 11)
				ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE cur.token <= EXCLUDED.token RETURNING 1) `+sql, res)
			return tag.RowsAffected(), err
		}, 0},
	}
	for _, stmt := range []struct{ name, sql string }{{"DELETE", del}, {"INSERT SELECT", copy}} {
		for _, w := range writers {
			t.Run(stmt.name+"/"+w.name, func(t *testing.T) {
				pool := newLedger(t)
				mustExec(t, pool, "CREATE TABLE items (res text NOT NULL, v text NOT NULL)")
				mustExec(t, pool, "CREATE TABLE copies (res text NOT NULL, v text NOT NULL)")
				n, err := whileHolding(t, pool, "r", 10, func(ctx context.Context) (int64, error) {
					return w.write(ctx, pool, "r", stmt.sql)
				})
				if err != nil || n != w.want {
					t.Fatalf("token 11's %s after waiting for token 10: got %d rows, %v, want %d, nil", stmt.name, n, err, w.want)
				}
			})
		}
	}
}

// whileHolding runs a fenced transaction with token holder that inserts a
// row into items, starts write, waits until write blocks on a lock, and
// commits. It returns write's result.
func whileHolding(t *testing.T, pool *pgxpool.Pool, res string, holder fence.Token, write func(context.Context) (int64, error)) (int64, error) {
	t.Helper()
	ctx := t.Context()
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	err := postgres.RunInTx(ctx, pool, res, holder, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO items (res, v) VALUES ($1, 'holder')", res); err != nil {
			return err
		}
		go func() {
			n, err := write(ctx)
			done <- result{n, err}
		}()
		waitLockWaiters(t, pool, 1)
		return nil
	})
	if err != nil {
		t.Fatalf("holder: got %v, want nil", err)
	}
	r := <-done
	return r.n, r.err
}
