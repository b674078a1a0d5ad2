package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
)

// rollbackTimeout bounds the ROLLBACK sent after a failure, which runs even
// when the caller's context has ended so that the connection stays usable.
const rollbackTimeout = 5 * time.Second

// RunInTx runs fn in a transaction fenced on resource in the
// [DefaultFenceTable]; see [Fences.RunInTx].
func RunInTx(ctx context.Context, db TxBeginner, resource string, token fence.Token, fn func(pgx.Tx) error, opts ...TxOption) error {
	return defaultFences().RunInTx(ctx, db, resource, token, fn, opts...)
}

// RunInTx begins a transaction on db, raises resource's fence to token as its
// first statement, runs fn and commits. If the fence is already higher, it
// rolls back and returns a [*fence.StaleError] (matching [fence.ErrStale])
// without calling fn: none of fn's writes can land. Until the transaction
// ends, fenced transactions on the same resource wait for it, so a stale one
// cannot commit after a newer one, under every isolation level
// ([WithIsolation], [WithTxOptions]). A newer token's transaction does not
// wait for a stale one for long, though: once its guard has waited 100 ms
// it ends the stale one's session (see "A frozen holder" in the package
// doc), and that one's next statement fails with [ErrTerminated].
//
// fn must not commit or roll back tx itself: RunInTx then returns an error
// matching [fence.ErrUnknownOutcome], since it cannot tell which fn did
// (fn's own Commit, if it made one, was fenced all the same, and its
// writes landed).
//
// If fn returns an error or panics, the transaction is rolled back and the
// error returned (a panic goes on after the rollback). Errors that carry a serialization
// failure or deadlock, from fn's statements, the fence or COMMIT, match
// [ErrRetryable]: nothing was written and running RunInTx again is safe.
// Under REPEATABLE READ and SERIALIZABLE, a transaction that waited on the
// fence behind another one fails that way.
//
// If COMMIT was sent and no answer came back (the connection broke, ctx
// ended), the error matches [fence.ErrUnknownOutcome]: the transaction may
// have committed. Any earlier failure leaves nothing written. (On a pgx.Tx
// the end is a RELEASE SAVEPOINT, which commits nothing: a broken connection
// there is a definite failure, as the outer transaction cannot commit.)
//
// ctx bounds the call; fn should use the same ctx for its statements. When
// ctx ends, the transaction is rolled back unless COMMIT was already sent.
// When db is a pgx.Tx, RunInTx uses a savepoint, its writes land only when
// that outer transaction commits, and every [TxOption] is refused.
//
// Invalid options fail the call before any I/O with an error matching
// [ErrInvalidOption].
func (f *Fences) RunInTx(ctx context.Context, db TxBeginner, resource string, token fence.Token, fn func(pgx.Tx) error, opts ...TxOption) error {
	if err := cmp.Or(f.check(), checkTx(ctx, db, resource, token, fn)); err != nil {
		return err
	}
	o, err := txOptions(db, opts)
	if err != nil {
		return err
	}
	p := preemption{after: o.preemptAfter, w: waiterOf([]fence.Claim{{Resource: resource, Token: token}}, nil), rows: f.xmaxSQL, rowKeys: []string{resource}}
	p.pool, _ = db.(*pgxpool.Pool)
	return f.tel.write(ctx, f.tel.Tx, token, func() string { return resource }, func(ctx context.Context) error {
		return runInTx(ctx, db, resource, token, o.pgx, p, fn, func(tx pgx.Tx) error {
			return f.Advance(ctx, tx, resource, token)
		})
	})
}

// runInTx begins a transaction on db, raises its fences with advance
// (watched by p), runs fn and commits. resource and token name the
// transaction in its errors.
func runInTx(ctx context.Context, db TxBeginner, resource string, token fence.Token, o pgx.TxOptions,
	p preemption, fn, advance func(pgx.Tx) error) error {
	tx, err := begin(ctx, db, o)
	if err != nil {
		return fmt.Errorf("postgres: begin fenced transaction on %s: %w", resource, classify(err))
	}
	// After a commit this is a no-op; after a panic in fn it runs before the
	// panic goes on.
	defer rollback(ctx, tx)
	if err := guard(ctx, tx, resource, p, advance); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return classify(err)
	}
	if err := tx.Commit(ctx); err != nil {
		_, savepoint := db.(pgx.Tx)
		return commitError(resource, token, err, savepoint)
	}
	return nil
}

// guard runs advance on tx under p's watch. When ctx ends meanwhile, the
// error says so, and names what the guard was waiting for if the watch
// found it, rather than the broken connection that pgx reports.
func guard(ctx context.Context, tx pgx.Tx, resource string, p preemption, advance func(pgx.Tx) error) (err error) {
	stop := p.watch(ctx, tx.Conn())
	// Deferred, so that a panic in advance (a tracer's) stops the watch too.
	defer func() {
		found := stop()
		switch {
		case err == nil || errors.Is(err, fence.ErrStale):
		case errors.Is(err, ErrTerminated):
			err = fmt.Errorf("%w: fenced transaction on %s: ended while its guard waited (a newer holder ends an older token's transaction that blocks it); nothing was written",
				ErrTerminated, resource)
		case ctx.Err() != nil:
			why := ""
			if found != nil {
				why = " (" + found.Error() + ")"
			}
			err = fmt.Errorf("postgres: fenced transaction on %s: the context ended (%w) while its guard was raising the fences%s; the transaction was rolled back and nothing was written",
				resource, context.Cause(ctx), why)
		}
	}()
	return advance(tx)
}

func checkTx(ctx context.Context, db TxBeginner, resource string, token fence.Token, fn func(pgx.Tx) error) error {
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

// txOptionsBeginner is a pool or connection, which can set a transaction's
// isolation level when beginning it.
type txOptionsBeginner interface {
	BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error)
}

func begin(ctx context.Context, db TxBeginner, o pgx.TxOptions) (pgx.Tx, error) {
	if o == (pgx.TxOptions{}) {
		return db.Begin(ctx)
	}
	return db.(txOptionsBeginner).BeginTx(ctx, o)
}

// txOptions records opts and checks them, and that db can begin a
// transaction with them.
func txOptions(db TxBeginner, opts []TxOption) (txConfig, error) {
	o, err := newTxOptions(opts)
	if err != nil {
		return o, err
	}
	return o, checkTxOptions(db, o.pgx)
}

// checkTxOptions refuses options on a handle that cannot begin a top-level
// transaction with them (a pgx.Tx, which begins a savepoint).
func checkTxOptions(db TxBeginner, o pgx.TxOptions) error {
	if _, ok := db.(txOptionsBeginner); ok || o == (pgx.TxOptions{}) {
		return nil
	}
	return fmt.Errorf("%w: transaction options need a handle that begins top-level transactions (a *pgxpool.Pool or *pgx.Conn), not %T", ErrInvalidOption, db)
}

func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}
