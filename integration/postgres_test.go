package integration_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestPostgresPausedHolder plays the failure fencing exists for, with real
// processes and servers: etcd for the lock, PostgreSQL for the data.
//
// Holder A, a separate process, takes the lock (1 s lease), passes its
// guard's check and is stopped with SIGSTOP. Its lease expires; holder B
// takes the lock and writes the job row. A is resumed with SIGCONT and
// writes. Fenced (a row update, or a transaction on the fence table),
// PostgreSQL refuses A's write and the row holds B's data; in the control,
// a plain UPDATE, A's stale write lands.
func TestPostgresPausedHolder(t *testing.T) {
	t.Parallel() // its own etcd, database (or bucket) and names; it mostly waits on a lease
	etcd := etcdlocktest.New(t)
	dsn := pgtest.New(t).NewDatabase(t)
	pool := pgPool(t, dsn)
	tests := []struct {
		mode       pgMode
		wantResult string
		wantHolder string
	}{
		{pgRow, "stale", "B, the new holder"},
		{pgTx, "stale", "B, the new holder"},
		{pgNone, "ok", "A, the paused holder"},
	}
	for i, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			job := fmt.Sprintf("job-%d", i)
			if _, err := pool.Exec(t.Context(), "INSERT INTO jobs (id) VALUES ($1)", job); err != nil {
				t.Fatal(err)
			}
			cfg := pgWorkerConfig{Etcd: etcd.Endpoints(), DSN: dsn, Lock: "pg-paused-holder-" + job, Job: job, Mode: tt.mode}
			a := startWorker(t, pgWorkerEnv, cfg)
			tokA := ready(t, a)
			pause(t, a)

			ctx, g := takeOver(t, etcd.Endpoints(), cfg.Lock, tokA)
			err := g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
				return pgWrite(ctx, pool, tt.mode, job, tok, "B, the new holder")
			})
			if err != nil {
				t.Fatalf("B's write: got %v, want nil", err)
			}

			resumeToWrite(t, a)
			if got := next(t, a, "RESULT"); got != tt.wantResult {
				t.Fatalf("A's late write: got %q, want %q", got, tt.wantResult)
			}
			var holder string
			if err := pool.QueryRow(ctx, "SELECT holder FROM jobs WHERE id = $1", job).Scan(&holder); err != nil || holder != tt.wantHolder {
				t.Fatalf("job row: got holder %q (%v), want %q", holder, err, tt.wantHolder)
			}
		})
	}
}

// pgPool returns a pool on dsn with the job table and the fence table.
func pgPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE jobs (id text PRIMARY KEY, holder text, fence bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CreateSchema(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}
