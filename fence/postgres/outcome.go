package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
)

// classify marks server errors callers act on: [ErrRetryable] for
// serialization failures and deadlocks, [ErrSchema] for missing tables,
// columns and key constraints, [fence.ErrStale] for the row trigger's
// refusal ([Table.CreateTrigger]), [ErrTerminated] for a session the
// server ended. The *pgconn.PgError stays reachable.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "40001", "40P01":
		return fmt.Errorf("%w: %w", ErrRetryable, err)
	case "42P01", "42703", "42P10":
		return fmt.Errorf("%w: %w", ErrSchema, err)
	case staleRowCode:
		return fmt.Errorf("%w: %w", fence.ErrStale, err)
	case "57P01":
		return fmt.Errorf("%w: %w", ErrTerminated, err)
	}
	return err
}

// answered reports whether err is the server's answer to a statement (an
// ERROR, after which the statement has failed and changed nothing), or
// happened before anything was sent. Either way the outcome is known.
func answered(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		// The server answered the COMMIT with ROLLBACK: the transaction
		// had failed, and nothing of it landed.
		return true
	}
	if errors.Is(err, pgconn.ErrConnClosed) {
		// pgx says "conn closed" (and safe to retry) both for a statement
		// it never sent and for one whose reply it lost: a simple-protocol
		// statement (COMMIT) whose read fails closes the connection, and
		// its reader then reports the closed connection, not the read
		// (pgx v5.12, MultiResultReader.NextResult). It may have landed.
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// FATAL and PANIC end the session; they may arrive after a commit.
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev != "FATAL" && sev != "PANIC"
	}
	return false
}

// WriteError turns the error of one write statement you ran yourself on
// pgx (a query sqlc generated, your own Exec) into fencelock's outcome
// vocabulary, for the resource and token the statement wrote with. A nil
// err gives nil.
//
// When the statement may have reached the server and no answer came back
// (the connection broke, the context ended mid-request, a FATAL error), it
// returns a [*fence.UnknownOutcomeError] matching [fence.ErrUnknownOutcome]:
// read the row back before deciding. Otherwise the statement failed and
// changed nothing, and the error wraps err with this package's sentinels
// where they apply ([ErrRetryable], [ErrSchema], [ErrTerminated]). err stays
// reachable with errors.As (*pgconn.PgError) either way.
//
// It cannot see the connection, so an error pgx raised before sending
// anything without marking it safe to retry (an argument it could not
// encode, a pool that could not hand out a connection) is reported as an
// unknown outcome too: a false alarm, never a missed one. A statement run in
// your own transaction lands only if the COMMIT succeeds; pass the COMMIT's
// error through WriteError too (pgx.ErrTxCommitRollback, a COMMIT the
// server answered with ROLLBACK, is a known failure).
func WriteError(resource string, token fence.Token, err error) error {
	if err == nil {
		return nil
	}
	return writeError(nil, "write", resource, token, err)
}

// writeError turns the error of a single write statement run on db into the
// error to return: an [*fence.UnknownOutcomeError] when the statement may
// have reached the server and no answer came back (the connection broke or
// the context ended mid-request), otherwise the classified error.
//
// A statement run in the caller's own transaction (db is a pgx.Tx) lands
// only if that transaction commits, and one whose connection broke never
// can: its failure is a definite one.
func writeError(db DB, what string, resource string, token fence.Token, err error) error {
	if !answered(err) {
		// A connection still open after an error finished its exchange
		// cleanly: the error was client-side (encoding arguments, ...).
		closed, known := connClosed(db)
		if _, inTx := db.(pgx.Tx); inTx && closed {
			return fmt.Errorf("postgres: %s %s: the connection broke inside the caller's transaction, which cannot commit now; nothing was written: %w",
				what, resource, classify(err))
		}
		if !known || closed {
			return &fence.UnknownOutcomeError{Resource: resource, Token: token, Err: classify(err)}
		}
	}
	return fmt.Errorf("postgres: %s %s: %w", what, resource, classify(err))
}

// commitError turns the error of a COMMIT into the error to return. A
// savepoint's "commit" (RELEASE SAVEPOINT) inside the caller's transaction
// commits nothing, so a lost answer to it is no unknown outcome.
func commitError(resource string, token fence.Token, err error, savepoint bool) error {
	switch {
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return fmt.Errorf("postgres: transaction on %s was already aborted, commit rolled it back: %w", resource, err)
	case errors.Is(err, pgx.ErrTxClosed):
		// fn called Commit or Rollback itself. Its commit, if any, was
		// fenced (the fence came first), but which it was is unknown here:
		// the writes may have landed.
		return &fence.UnknownOutcomeError{Resource: resource, Token: token,
			Err: fmt.Errorf("postgres: the function ended the fenced transaction itself (Commit or Rollback), so whether it committed is not known here; leave that to RunInTx: %w", err)}
	case !answered(err) && !savepoint:
		return &fence.UnknownOutcomeError{Resource: resource, Token: token, Err: classify(err)}
	}
	return fmt.Errorf("postgres: commit on %s: %w", resource, classify(err))
}
