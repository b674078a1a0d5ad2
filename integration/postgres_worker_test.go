package integration_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// pgWorkerEnv, when set in the environment of this test binary, makes it run
// as the first lock holder of TestPostgresPausedHolder instead of running
// tests. Its value is the JSON of a pgWorkerConfig.
const pgWorkerEnv = "FENCELOCK_IT_PG_WORKER"

// pgWorkerConfig tells a worker process where everything is.
type pgWorkerConfig struct {
	Etcd []string
	DSN  string
	Lock string
	Job  string
	Mode pgMode
}

// The worker runs from init, before any TestMain in this package, so that
// it starts no servers of its own.
func init() {
	if cfg := os.Getenv(pgWorkerEnv); cfg != "" {
		os.Exit(pgWorker(cfg))
	}
}

// pgWorker takes the lock, connects to PostgreSQL, passes the guard's
// check, reports "READY <token>" and waits for a line on stdin (the parent
// stops it meanwhile, past its lease). Then it writes and reports
// "RESULT ok", "RESULT stale" or "RESULT error: …".
func pgWorker(cfgJSON string) int { return workerMain(cfgJSON, pgWorkerRun) }

func pgWorkerRun(ctx context.Context, cfg pgWorkerConfig) error {
	locks, stop, err := workerLocks(ctx, cfg.Etcd)
	if err != nil {
		return err
	}
	defer stop()
	// Connected before the pause, so that the pause covers only the write.
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	lock, err := locks.Lock(ctx, cfg.Lock)
	if err != nil {
		return err
	}
	g, err := fence.NewGuard(lock)
	if err != nil {
		return err
	}
	return g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
		if err := readyThenWait(tok); err != nil {
			return err
		}
		return pgWrite(ctx, conn, cfg.Mode, cfg.Job, tok, "A, the paused holder")
	})
}

// pgMode is how both holders write the job row.
type pgMode string

const (
	pgRow  pgMode = "fenced row update"  // postgres.Table.Update
	pgTx   pgMode = "fenced transaction" // postgres.RunInTx
	pgNone pgMode = "no fencing"         // a plain UPDATE: the control
)

// pgHandle is what the holders write through: a *pgx.Conn or a pool.
type pgHandle interface {
	postgres.DB
	postgres.TxBeginner
}

// pgWrite records holder as the owner of job, with token tok.
func pgWrite(ctx context.Context, db pgHandle, mode pgMode, job string, tok fence.Token, holder string) error {
	switch mode {
	case pgRow:
		jobs, err := postgres.NewTable(pgx.Identifier{"jobs"}, postgres.WithKeyColumn("id"))
		if err != nil {
			return err
		}
		return jobs.Update(ctx, db, job, tok, postgres.Set("holder", holder))
	case pgTx:
		return postgres.RunInTx(ctx, db, job, tok, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE jobs SET holder = $2 WHERE id = $1", job, holder)
			return err
		})
	case pgNone:
		_, err := db.Exec(ctx, "UPDATE jobs SET holder = $2, fence = $3 WHERE id = $1", job, holder, int64(tok))
		return err
	}
	return fmt.Errorf("unknown mode %q", mode)
}
