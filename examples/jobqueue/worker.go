package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// workerConfig is what a worker process is told, as JSON in [envWorker].
type workerConfig struct {
	DSN    string // the jobs database
	Etcd   string // endpoint, for the lock-per-job queue
	ID     int
	Queue  string // "naive", "skiplocked" or "etcdlock"
	Victim bool   // stops in the middle of its third job, until killed
}

// idleWait is how long an idle worker waits before it looks again while
// jobs it could not take (held by another) are left.
const idleWait = 5 * time.Millisecond

// jobWorker is one worker process's state.
type jobWorker struct {
	cfg   workerConfig
	conn  *pgx.Conn
	locks *etcdlock.Client // etcdlock queue only
	stdin io.Reader
	out   io.Writer
	taken int // jobs taken so far
}

// worker connects, reports READY, and once told to go drains the jobs
// table, reporting TOOK and DONE with each job's id; a victim reports HELD
// on its third job and goes no further.
func worker(js string, stdin io.Reader, stdout io.Writer) error {
	w := &jobWorker{stdin: stdin, out: stdout}
	if err := json.Unmarshal([]byte(js), &w.cfg); err != nil {
		return err
	}
	ctx := context.Background()
	var err error
	if w.conn, err = pgx.Connect(ctx, w.cfg.DSN); err != nil {
		return err
	}
	defer w.conn.Close(ctx)
	if w.cfg.Queue == "etcdlock" {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{w.cfg.Etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		if w.locks, err = etcdlock.New(cli, etcdlock.WithTTL(lockTTL)); err != nil {
			return err
		}
		defer w.locks.Close(ctx)
	}
	if err := childproc.Report(stdout, "READY", ""); err != nil {
		return err
	}
	if err := childproc.AwaitGo(stdin); err != nil { // all workers start at once
		return err
	}
	return w.drain(ctx)
}

// drain takes jobs until none is left undone.
func (w *jobWorker) drain(ctx context.Context) error {
	for {
		took, err := w.one(ctx)
		if err != nil || took {
			if err != nil {
				return err
			}
			continue
		}
		var left int
		if err := w.conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE done_at IS NULL`).Scan(&left); err != nil || left == 0 {
			return err
		}
		time.Sleep(idleWait) // jobs are left, held by others: look again soon
	}
}

// one does one job if it can take one, and reports whether it did.
func (w *jobWorker) one(ctx context.Context) (bool, error) {
	switch w.cfg.Queue {
	case "naive":
		return w.inTransaction(ctx, `SELECT id FROM jobs WHERE done_at IS NULL ORDER BY id LIMIT 1`)
	case "skiplocked":
		return w.inTransaction(ctx, `SELECT id FROM jobs WHERE done_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`)
	default:
		return w.withLock(ctx)
	}
}

// inTransaction does one job in one transaction: pick it with pick, record
// the run, work, mark it done, commit.
func (w *jobWorker) inTransaction(ctx context.Context, pick string) (bool, error) {
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	var id int
	if err := tx.QueryRow(ctx, pick).Scan(&id); errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := w.took(id); err != nil {
		return true, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO runs (job_id, worker) VALUES ($1, $2)`, id, w.cfg.ID); err != nil {
		return true, err
	}
	if err := w.work(id); err != nil {
		return true, err
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET done_at = clock_timestamp(), done_by = $2 WHERE id = $1`, id, w.cfg.ID); err != nil {
		return true, err
	}
	if err := tx.Commit(ctx); err != nil {
		return true, err
	}
	return true, childproc.Report(w.out, "DONE", fmt.Sprint(id))
}

// took reports a job taken.
func (w *jobWorker) took(id int) error {
	w.taken++
	return childproc.Report(w.out, "TOOK", fmt.Sprint(id))
}

// work is the job itself. A victim, on its third job, reports HELD and
// waits here until it is killed (or its stdin ends).
func (w *jobWorker) work(id int) error {
	if w.cfg.Victim && w.taken == 3 {
		if err := childproc.Report(w.out, "HELD", fmt.Sprint(id)); err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, w.stdin)
		return errors.New("worker: stopped in the middle of a job")
	}
	time.Sleep(jobTime) // stands for the job's work
	return nil
}
