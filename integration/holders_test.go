package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestHoldersPausedHolder is TestPostgresPausedHolder with locks fencelock
// does not provide (docs/holders.md): a bsm/redislock lock with
// fence/redisholder's token, and a PostgreSQL advisory lock with
// fence/pgadvisory's, each fencing writes to PostgreSQL through
// fence/postgres.
//
// Holder A, a separate process, takes the lock, passes its guard's check
// and is stopped with SIGSTOP. Its lock ends: the redislock key's 1 s TTL
// runs out; the advisory lock's session, which a frozen process keeps
// open, is ended by B (pg_terminate_backend, as docs/holders.md says a
// next holder or an operator must), or, made WithSessionTimeout or by the
// connection's own idle_session_timeout, by the server once it has been
// idle 1 s. Holder B takes the lock (waiting for it) and writes the job
// row; where the lock's end is a lease, B has it within the lease + 1 s of
// A's pause. A is resumed with SIGCONT and writes. Fenced, PostgreSQL
// refuses A's write (fence.ErrStale) and the row holds B's; in the
// control, a plain UPDATE, A's late write lands.
func TestHoldersPausedHolder(t *testing.T) {
	testenv.Long(t, "a frozen holder waits out a redislock TTL (TestPostgresPausedHolder stays in the fast loop)")
	t.Parallel()
	rdb := redistest.New(t)
	dsn := pgtest.New(t).NewDatabase(t)
	pool := pgPool(t, dsn)
	if err := pgadvisory.CreateSequence(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, kind := range []holderKind{kindRedislock, kindAdvisory, kindAdvisoryLease, kindAdvisoryServerLease} {
		for _, tt := range []struct {
			mode       pgMode
			wantResult string
			wantHolder string
		}{
			{pgRow, "stale", "B, the new holder"},
			{pgNone, "ok", "A, the paused holder"},
		} {
			i++
			t.Run(string(kind)+"/"+string(tt.mode), func(t *testing.T) {
				job := fmt.Sprintf("job-%d", i)
				if _, err := pool.Exec(t.Context(), "INSERT INTO jobs (id) VALUES ($1)", job); err != nil {
					t.Fatal(err)
				}
				cfg := holdersWorkerConfig{Kind: kind, Redis: rdb.Addr(), DSN: dsn, Job: job, Mode: tt.mode,
					Lock: "fencelock-it:holders:" + job}
				if kind != kindRedislock {
					cfg.Lock = strconv.FormatInt(rand.Int64(), 10)
				}
				a := startWorker(t, holdersWorkerEnv, cfg)
				tokA := ready(t, a)
				pause(t, a)
				paused := time.Now()

				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				if kind == kindAdvisory {
					endSession(t, ctx, pool, cfg.Lock)
				}
				hB, release, err := takeHolder(ctx, cfg)
				if err != nil {
					t.Fatalf("B takes the lock: got %v, want nil", err)
				}
				defer release()
				if waited := time.Since(paused); kind != kindAdvisory && waited > holdersTTL+time.Second {
					t.Errorf("B took the lock %v after A's pause, over the lease %v + 1 s", waited.Round(time.Millisecond), holdersTTL)
				}
				if hB.Token() <= tokA {
					t.Fatalf("B's token %d is not above A's %d", hB.Token(), tokA)
				}
				gB, err := fence.NewGuard(hB)
				if err != nil {
					t.Fatal(err)
				}
				err = gB.Do(ctx, func(ctx context.Context, tok fence.Token) error {
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
}

// endSession ends the session that holds the advisory lock key (in
// decimal), as a next holder must end a frozen holder's.
func endSession(t *testing.T, ctx context.Context, pool pgHandle, key string) {
	t.Helper()
	var ended bool
	err := pool.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid`, key).Scan(&ended)
	if err != nil || !ended {
		t.Fatalf("pg_terminate_backend of A's session: got %v, %v; want true", ended, err)
	}
}
