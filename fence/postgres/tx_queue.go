package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batchCommit is the COMMIT a queuedTx sends after its queued statements.
// It is spelled apart from pgx's own "commit" on purpose: closing the pgx
// transaction afterwards (closeCommitted) fails pgx's "commit", which
// makes pgx drop that text from its statement cache; this one stays.
const batchCommit = "COMMIT"

// queued is a statement a queuedTx sends later: sql with args, and fail,
// which turns its error into the one to return.
type queued struct {
	sql  string
	args []any
	fail func(error) error
}

// queuedTx is the transaction a fenced transaction's function gets when
// RunInTx began it on a pool or connection: a pgx.Tx that can hold
// statements back (Outbox.Record's) and send them with COMMIT in one batch,
// one round trip instead of two. A held statement runs, in order, before
// the transaction's next statement through it (so that statement sees its
// writes), or with COMMIT; if it fails, COMMIT is not run. Statements run
// on Conn() or LargeObjects() directly do not send held ones first.
//
// Not safe for concurrent use, as pgx.Tx is not.
type queuedTx struct {
	pgx.Tx
	held  []queued
	err   error // the first held statement that failed, as its fail made it
	ended bool  // set when RunInTx is done with the transaction
}

// queueable reports whether RunInTx on db with o may hold statements back:
// the transaction must be pgx's own, so that closeCommitted can close it,
// and end with the plain COMMIT that the batch sends.
func queueable(db TxBeginner, o pgx.TxOptions) bool {
	switch db.(type) {
	case *pgxpool.Pool, *pgx.Conn, *pgxpool.Conn:
		return o.CommitQuery == ""
	}
	return false
}

// hold queues s to run before the next statement or with COMMIT, and
// reports whether it did; it does not once RunInTx is done with q.
func (q *queuedTx) hold(s queued) bool {
	if q.ended {
		return false
	}
	q.held = append(q.held, s)
	return true
}

// end marks q done: later statements run at once (and fail, the
// transaction being over).
func (q *queuedTx) end() { q.ended, q.held = true, nil }

// flush runs the held statements one by one, stopping at the first
// failure, which it returns (and keeps for RunInTx's error).
func (q *queuedTx) flush(ctx context.Context) error {
	held := q.held
	q.held = nil
	for _, s := range held {
		if _, err := q.Tx.Exec(ctx, s.sql, s.args...); err != nil {
			q.err = s.fail(err)
			return q.err
		}
	}
	return nil
}

// commit sends the held statements and COMMIT in one batch, and marks q
// ended. A held statement's failure that the server answered, or its
// ending the session there, is returned first, made by its fail: the
// batch stopped there, COMMIT did not run and the transaction is still
// open or gone (the caller rolls it back). Any other
// error is COMMIT's, raw, for commitError: an unanswered failure of a held
// statement too, since COMMIT may have run after it.
func (q *queuedTx) commit(ctx context.Context) (heldErr, commitErr error) {
	held := q.held
	q.end()
	if len(held) == 0 || q.Conn().PgConn().TxStatus() != 'T' {
		// Nothing held, or the transaction has failed (COMMIT rolls it
		// back) or ended: pgx's own COMMIT says so.
		return nil, q.Tx.Commit(ctx)
	}
	b := &pgx.Batch{}
	for _, s := range held {
		b.Queue(s.sql, s.args...)
	}
	b.Queue(batchCommit)
	br := q.Tx.SendBatch(ctx, b)
	defer q.closeCommitted()
	for _, s := range held {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			if answered(err) || endedBefore(err) {
				return s.fail(err), nil
			}
			return nil, err
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	return nil, err
}

// endedBefore reports whether err, a held statement's (or the preparing
// of the batch's, which comes first), is the server ending the session
// (57P01: a newer holder's preemption, pg_terminate_backend, a shutdown):
// the server ran the batch in order and its process ended at that
// statement at the latest, so the COMMIT after it never ran.
func endedBefore(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P01"
}

// closeCommitted closes the pgx transaction under q when the batch ended
// it, without sending pgx's own COMMIT (one more round trip, and a
// warning): pgx's Commit given an ended context sends nothing, marks the
// transaction closed, and keeps a connection that is idle (a pool's goes
// back to it). When the transaction is still open, the caller's rollback
// ends it.
func (q *queuedTx) closeCommitted() {
	if c := q.Conn(); c.IsClosed() || c.PgConn().TxStatus() != 'I' {
		return
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = q.Tx.Commit(done)
}

// Begin sends the held statements, then begins a savepoint.
func (q *queuedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := q.flush(ctx); err != nil {
		return nil, err
	}
	return q.Tx.Begin(ctx)
}

// Commit is RunInTx's commit, which a function must not call (RunInTx
// then returns an error matching fence.ErrUnknownOutcome).
func (q *queuedTx) Commit(ctx context.Context) error {
	heldErr, err := q.commit(ctx)
	return errors.Join(heldErr, err)
}

// Rollback drops the held statements and rolls back.
func (q *queuedTx) Rollback(ctx context.Context) error {
	q.end()
	return q.Tx.Rollback(ctx)
}

// Exec sends the held statements, then runs sql.
func (q *queuedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := q.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return q.Tx.Exec(ctx, sql, args...)
}

// Query sends the held statements, then runs sql. If one of them failed,
// the transaction has, and so does sql.
func (q *queuedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	_ = q.flush(ctx)
	return q.Tx.Query(ctx, sql, args...)
}

// QueryRow sends the held statements, then runs sql.
func (q *queuedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := q.flush(ctx); err != nil {
		return errRow{err}
	}
	return q.Tx.QueryRow(ctx, sql, args...)
}

// SendBatch sends the held statements, then b. If one of them failed,
// the transaction has, and so does b.
func (q *queuedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	_ = q.flush(ctx)
	return q.Tx.SendBatch(ctx, b)
}

// CopyFrom sends the held statements, then copies.
func (q *queuedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := q.flush(ctx); err != nil {
		return 0, err
	}
	return q.Tx.CopyFrom(ctx, table, columns, src)
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
