package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/tel"
)

// RunInTx begins a transaction on db, raises resource's fence to token as
// its first statement, runs fn and commits. If the fence is already
// higher, it rolls back and returns a [*fence.StaleError] (matching
// [fence.ErrStale]) without calling fn: none of fn's writes can land.
// Until the transaction ends, fenced transactions on the same resource
// wait for it, so a stale one cannot commit after a newer one, under every
// isolation level.
//
// A deadlock or busy lock ([ErrRetryable]) while beginning or raising the
// fence, before fn runs, is retried ([WithRetries]): in SQLite a fenced
// transaction that finds another writer's lock waits its turn this way even
// without busy_timeout. Once fn has run, such an error is returned.
//
// fn must not commit or roll back tx itself: RunInTx then returns an error
// matching [fence.ErrUnknownOutcome], since it cannot tell which fn did
// (fn's own Commit, if it made one, was fenced all the same, and its
// writes landed). If fn returns an error or panics, the
// transaction is rolled back and the error returned (a panic goes on after
// the rollback). If COMMIT was sent and no answer came back, the error
// matches [fence.ErrUnknownOutcome]: the transaction may have committed.
// Any earlier failure leaves nothing written.
//
// ctx bounds the call; fn should use the same ctx for its statements.
// When ctx ends before COMMIT is sent, database/sql rolls the transaction
// back.
func (f *Fences) RunInTx(ctx context.Context, db TxBeginner, resource string, token fence.Token, fn func(*sql.Tx) error, opts ...TxOption) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.runInTx(ctx, f.tel.Tx, db, resource, token, fn, opts)
}

// runInTx is [Fences.RunInTx], reported as op.
func (f *Fences) runInTx(ctx context.Context, op *tel.Op, db TxBeginner, resource string, token fence.Token, fn func(*sql.Tx) error, opts []TxOption) error {
	if err := checkTx(ctx, db, resource, token, fn); err != nil {
		return err
	}
	return f.runClaims(ctx, op, db, claims{{Resource: resource, Token: token}}, fn, opts)
}

// runClaims runs the fenced transaction over cs, checked, reported as op.
func (f *Fences) runClaims(ctx context.Context, op *tel.Op, db TxBeginner, cs claims, fn func(*sql.Tx) error, opts []TxOption) error {
	o, err := newTxOptions(opts)
	if err != nil {
		return err
	}
	return f.tel.write(ctx, op, cs.token(), cs.label, func(ctx context.Context) error {
		return f.commit(ctx, db, cs, fn, o)
	})
}

// commit runs the fenced transaction of runClaims.
func (f *Fences) commit(ctx context.Context, db TxBeginner, cs claims, fn func(*sql.Tx) error, o *txConfig) error {
	var tx *sql.Tx
	var err error
	err = retry(ctx, f.d, f.retries, f.tel, func() error {
		tx, err = f.begin(ctx, db, cs, o)
		return err
	})
	if err != nil {
		return err
	}
	// After a commit this is a no-op; after a panic in fn it runs before
	// the panic goes on.
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		if lostInTx(err) {
			return fmt.Errorf("%w: fenced transaction on %s, before its COMMIT; nothing of it was written: %w", ErrTerminated, cs.label(), err)
		}
		return f.d.classifyCallers(err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlfence: fenced transaction on %s not committed: %w", cs.label(), err)
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			// Its commit, if it made one, was fenced (the fence came
			// first) and its writes landed; which it was is not known here.
			return &fence.UnknownOutcomeError{Resource: cs.label(), Token: cs.token(),
				Err: fmt.Errorf("sqlfence: the function ended the fenced transaction itself (Commit or Rollback), so whether it committed is not known here; leave that to RunInTx: %w", err)}
		}
		f.tel.countRetryable(ctx, f.d, err)
		return f.d.commitError(cs.label(), cs.token(), err)
	}
	return nil
}

// begin begins the transaction and raises the fences, in cs's order; on
// failure nothing is left open.
func (f *Fences) begin(ctx context.Context, db TxBeginner, cs claims, o *txConfig) (*sql.Tx, error) {
	// The fence's statement is prepared on the pool before the
	// transaction holds a connection of it: preparing it inside would
	// wait for a second connection, forever in a pool of one.
	pool, _ := db.(*sql.DB) // nil for a *sql.Conn
	if pool != nil {
		f.stmts.stmt(ctx, pool, f.advanceStmt("", 1).String())
	}
	tx, err := db.BeginTx(ctx, &o.sql)
	if err != nil {
		return nil, fmt.Errorf("sqlfence: begin fenced transaction on %s: %w", cs.label(), f.d.classify(err))
	}
	done := false
	defer func() {
		if !done { // an error, or a panic in a fence's statement (a tracer's)
			_ = tx.Rollback()
		}
	}()
	for _, c := range cs {
		p := preemption{f: f, pool: pool, after: o.preemptAfter, claim: c}
		if err := p.guard(ctx, func() error { return f.advance(ctx, pool, tx, c.Resource, c.Token) }); err != nil {
			return nil, err
		}
	}
	done = true
	return tx, nil
}

func checkTx(ctx context.Context, db TxBeginner, resource string, token fence.Token, fn func(*sql.Tx) error) error {
	if err := checkDB(db); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	if resource == "" {
		return fmt.Errorf("%w: empty resource", fence.ErrInvalidKey)
	}
	if err := token.Validate(); err != nil {
		return err
	}
	return checkCtx(ctx)
}
