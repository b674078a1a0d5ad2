package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// withLock does one job under a lock per job, the work outside any
// transaction: try each undone job's lock, take the first one free that
// is still undone, work, then record the run and mark the job done (with
// the lock's token) in one transaction.
func (w *jobWorker) withLock(ctx context.Context) (bool, error) {
	ids, err := w.undone(ctx)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		lock, err := w.locks.TryLock(ctx, fmt.Sprintf("job-%d", id))
		if errors.Is(err, etcdlock.ErrLocked) {
			continue
		}
		if err != nil {
			return false, err
		}
		took, err := w.underLock(ctx, id, lock)
		if uerr := lock.Unlock(ctx); err == nil {
			err = uerr
		}
		if took || err != nil {
			return took, err
		}
	}
	return false, nil
}

// underLock does job id while holding its lock; it reports false if the
// job was done meanwhile.
func (w *jobWorker) underLock(ctx context.Context, id int, lock *etcdlock.Lock) (bool, error) {
	var done bool
	if err := w.conn.QueryRow(ctx, `SELECT done_at IS NOT NULL FROM jobs WHERE id = $1`, id).Scan(&done); err != nil || done {
		return false, err
	}
	if err := w.took(id); err != nil {
		return true, err
	}
	if err := w.work(id); err != nil {
		return true, err
	}
	err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO runs (job_id, worker) VALUES ($1, $2)`, id, w.cfg.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE jobs SET done_at = clock_timestamp(), done_by = $2, token = $3
			WHERE id = $1 AND done_at IS NULL`, id, w.cfg.ID, int64(lock.Token()))
		return err
	})
	if err != nil {
		return true, err
	}
	return true, childproc.Report(w.out, "DONE", fmt.Sprint(id))
}

// undone returns the ids of the jobs not done yet, in order.
func (w *jobWorker) undone(ctx context.Context) ([]int, error) {
	rows, err := w.conn.Query(ctx, `SELECT id FROM jobs WHERE done_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
