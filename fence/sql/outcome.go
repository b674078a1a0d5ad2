package sqlfence

import (
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// writeError turns the error of a single write statement run on db into
// the error to return: an [*fence.UnknownOutcomeError] when the statement
// may have reached the server and no answer came back (the connection
// broke, the context ended mid-request), otherwise the classified error.
//
// A context that ends while database/sql waits for a free connection of
// the pool is reported the same way: nothing was sent then, but the error
// does not say so, and an unknown outcome is the safe reading.
//
// An argument database/sql could not convert for the driver is bad input
// ([ErrInvalidArgument]): it fails before anything is sent.
//
// A statement run in the caller's own *sql.Tx lands only if that
// transaction commits, and none can after such a failure: database/sql
// rolls the transaction back when its context ends, and a transaction
// whose connection broke cannot commit. Its failure is a definite one.
func (d Dialect) writeError(db DB, what, resource string, token fence.Token, err error) error {
	return d.WriteError(inTx(db), what, resource, token, err)
}

// WriteError is the rule this package's own writes follow, for a fenced
// statement another layer ran (an ORM such as GORM, through fence/gorm):
// it turns the error of one write statement of dialect d into the error
// to return. inTx says whether the statement ran in the caller's
// transaction, where every failure is a definite one (that transaction
// cannot commit it now); otherwise a statement that may have reached the
// server with no answer back (the connection broke, the context ended)
// gives an [*fence.UnknownOutcomeError], and the server's answers are
// classified ([ErrRetryable], [ErrSchema], [ErrDialect]) with the
// driver's error still reachable. what and resource name the write in
// the message. In a transaction whose connection the server ended (as a
// newer holder ends a frozen older one's) or that broke, the error
// matches [ErrTerminated] too.
func (d Dialect) WriteError(inTx bool, what, resource string, token fence.Token, err error) error {
	if unconvertible(err) {
		return fmt.Errorf("%w: %s %s: %w", ErrInvalidArgument, what, resource, err)
	}
	if !inTx && d == PostgreSQL && errors.Is(err, driver.ErrBadConn) {
		// pgx's driver says driver.ErrBadConn for an answer it lost (it
		// calls the closed connection safe to retry), and the statement
		// may have landed. This package sends its writes on a *sql.DB
		// through a connection of its own (sendOnce), which sends them
		// once: the error is its only word.
		return &fence.UnknownOutcomeError{Resource: resource, Token: token, Err: err}
	}
	if _, answered := d.serverError(err); !answered && !notSent(err) {
		if inTx {
			if d.terminated(err) || lostInTx(err) {
				// A newer holder may have ended it (preemption).
				err = fmt.Errorf("%w: %w", ErrTerminated, err)
			}
			return fmt.Errorf("sqlfence: %s %s failed inside the caller's transaction, which cannot commit it now; nothing was written: %w",
				what, resource, err)
		}
		return &fence.UnknownOutcomeError{Resource: resource, Token: token, Err: err}
	}
	return fmt.Errorf("sqlfence: %s %s: %w", what, resource, d.classify(err))
}

// commitError turns the error of a COMMIT into the error to return.
func (d Dialect) commitError(resource string, token fence.Token, err error) error {
	return d.CommitError(resource, token, err)
}

// CommitError turns the error of the COMMIT of a fenced transaction of
// dialect d, run by another layer (fence/gorm's Update), into the error
// to return, as this package's own transactions do: a COMMIT that may
// have reached the server with no answer back gives an
// [*fence.UnknownOutcomeError] (matching [ErrTerminated] too when the
// server ended the session); a server's answer is classified.
func (d Dialect) CommitError(resource string, token fence.Token, err error) error {
	if _, answered := d.serverError(err); !answered && !notSent(err) {
		if d.terminated(err) || lostInTx(err) {
			err = fmt.Errorf("%w: %w", ErrTerminated, err)
		}
		return &fence.UnknownOutcomeError{Resource: resource, Token: token, Err: err}
	}
	if lostInTx(err) {
		return fmt.Errorf("%w: commit on %s, not sent: %w", ErrTerminated, resource, err)
	}
	return fmt.Errorf("sqlfence: commit on %s: %w", resource, d.classify(err))
}
