package integration_test

import (
	"context"
	"errors"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// electWorkerEnv, when set in the environment of this test binary, makes it
// run as a candidate of TestElection* instead of running tests. Its value
// is the JSON of an electWorkerConfig.
const electWorkerEnv = "FENCELOCK_IT_ELECT_WORKER"

// electWorkerConfig tells a candidate process what to do as leader.
type electWorkerConfig struct {
	Etcd     []string
	Election string
	DSN      string // with Job and Mode: write the job row once, after the parent's go-ahead
	Job      string
	Mode     pgMode
}

func init() {
	if cfg := os.Getenv(electWorkerEnv); cfg != "" {
		os.Exit(workerMain(cfg, electWorkerRun))
	}
}

// electWorkerRun runs Client.Run. Its leader function reports "LEADING
// <token>"; without a job it then leads until killed; with one it passes
// its guard's check, reports "READY <token>", waits for the parent (which
// stops it meanwhile, past its lease), writes the job row with the term's
// token, and ends the run with the write's outcome.
func electWorkerRun(ctx context.Context, cfg electWorkerConfig) error {
	locks, stop, err := workerLocks(ctx, cfg.Etcd)
	if err != nil {
		return err
	}
	defer stop()
	var conn *pgx.Conn
	if cfg.Job != "" {
		// Connected before the pause, so that the pause covers only the write.
		if conn, err = pgx.Connect(ctx, cfg.DSN); err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wrote error
	err = locks.Run(ctx, cfg.Election, "worker", func(tctx context.Context, term *etcdlock.Term) error {
		if err := childproc.Report(os.Stdout, "LEADING", strconv.FormatInt(int64(term.Token()), 10)); err != nil {
			return err
		}
		if conn == nil {
			<-tctx.Done()
			return nil
		}
		g, err := fence.NewGuard(term)
		if err != nil {
			return err
		}
		wrote = g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
			if err := readyThenWait(tok); err != nil {
				return err
			}
			// ctx, not tctx: the write must reach PostgreSQL even though the
			// term ended during the pause, so that the resource can refuse it.
			return pgWrite(ctx, conn, cfg.Mode, cfg.Job, tok, "A, the paused leader")
		})
		cancel()
		return nil
	})
	if errors.Is(err, context.Canceled) && conn != nil {
		return wrote
	}
	return err
}
