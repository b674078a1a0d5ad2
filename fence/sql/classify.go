package sqlfence

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// kind is what a server error means to a fenced write.
type kind int

const (
	kindOther     kind = iota
	kindRetryable      // nothing written; the statement may be run again
	kindSchema         // a table, column or unique constraint is missing
	kindDialect        // the server is of another dialect: the statement was refused
)

// sqliteError is modernc.org/sqlite's *sqlite.Error (and any driver's
// error with a SQLite result code), read without importing the driver.
type sqliteError interface{ Code() int }

// sqlStateError is pgx's *pgconn.PgError (and any error with a SQLSTATE),
// read without importing pgx.
type sqlStateError interface{ SQLState() string }

// serverError reports whether err is the server's answer to a statement:
// an error the statement failed with, after which it changed nothing. A
// transport error, a context that ended, anything else is not.
func (d Dialect) serverError(err error) (kind, bool) {
	if s, ok := answeredAs(err); ok && s != d {
		// A server of another dialect: its own rules say whether it
		// answered the statement (then it was refused: it did not parse)
		// or ended the session, after which a commit may have happened.
		if _, answered := s.serverError(err); !answered {
			return kindOther, false
		}
		return kindDialect, true
	}
	switch d {
	case MySQL:
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			return kindOther, false
		}
		switch me.Number {
		case 1213, 1205: // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
			return kindRetryable, true
		case 1146, 1054: // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
			return kindSchema, true
		}
		// 1927 (connection killed), 1053 (server shutdown) arrive after a
		// commit may have happened.
		return kindOther, me.Number != 1927 && me.Number != 1053
	case SQLite:
		var se sqliteError
		if !errors.As(err, &se) {
			return kindOther, false
		}
		switch se.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return kindRetryable, true
		case 1: // SQLITE_ERROR: schema errors have no code of their own
			msg := err.Error()
			if strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") ||
				strings.Contains(msg, "has no column named") || strings.Contains(msg, "ON CONFLICT clause does not match") {
				return kindSchema, true
			}
		}
		return kindOther, true
	case PostgreSQL:
		var pe sqlStateError
		if !errors.As(err, &pe) {
			return kindOther, false
		}
		code := pe.SQLState()
		switch code {
		case "40001", "40P01":
			return kindRetryable, true
		case "42P01", "42703", "42P10":
			return kindSchema, true
		}
		// Class 08 (connection exception), 57P (shutdown, terminated) and
		// XX (internal) end the session: they may arrive after a commit.
		return kindOther, !strings.HasPrefix(code, "08") && !strings.HasPrefix(code, "57P") && !strings.HasPrefix(code, "XX")
	}
	return kindOther, false
}

// answeredAs reports which dialect's server answered with err, when its
// driver's error type says (go-sql-driver/mysql's, a SQLite driver's
// result code, a SQLSTATE).
func answeredAs(err error) (Dialect, bool) {
	var me *mysql.MySQLError
	var se sqliteError
	var pe sqlStateError
	switch {
	case errors.As(err, &me):
		return MySQL, true
	case errors.As(err, &se):
		return SQLite, true
	case errors.As(err, &pe):
		return PostgreSQL, true
	}
	return 0, false
}

// notSent reports whether err says the request never left: the driver
// found the connection broken before writing (database/sql's
// driver.ErrBadConn), or pgx's errors that are safe to retry.
func notSent(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var s interface {
		SafeToRetry() bool
		error
	}
	// pgx says "conn closed" (and safe to retry) both for a statement it
	// never sent and for one whose reply it lost: a COMMIT whose read
	// fails closes the connection, and its reader then reports the closed
	// connection (pgx v5.12). Matched by its text, so that this package
	// does not link pgx; TestRunInTxCommitLostPostgreSQL holds it.
	return errors.As(err, &s) && s.SafeToRetry() && s.Error() != "conn closed"
}

// unconvertible reports whether err is the refusal of an argument the
// driver cannot take (a struct, a channel), made before the statement is
// run: database/sql's own (MySQL's and SQLite's drivers check arguments
// through it), or pgx's, which takes every argument from database/sql and
// fails to encode it. Neither has a type of its own.
func unconvertible(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "sql: converting argument ") || strings.HasPrefix(msg, "failed to encode args[")
}

// classify marks server errors callers act on ([ErrRetryable],
// [ErrSchema], [ErrDialect]) in the answer to a statement of this
// package's; the driver's error stays reachable.
func (d Dialect) classify(err error) error {
	return d.classifyAs(err, true)
}

// classifyCallers is classify for an error of the caller's own code (the
// fn of RunInTx), whose statements are not this package's: it may run them
// on another database, so no [ErrDialect].
func (d Dialect) classifyCallers(err error) error {
	return d.classifyAs(err, false)
}

func (d Dialect) classifyAs(err error, ours bool) error {
	k, _ := d.serverError(err)
	if k == kindDialect && !ours {
		return err
	}
	if d.terminated(err) {
		return fmt.Errorf("%w: %w", ErrTerminated, err)
	}
	switch k {
	case kindRetryable:
		return fmt.Errorf("%w: %w", ErrRetryable, err)
	case kindSchema:
		return fmt.Errorf("%w: %w", ErrSchema, err)
	case kindDialect:
		s, _ := answeredAs(err)
		return fmt.Errorf("%w: the statement is %s, the database answered as %s (give the dialect of the database the handle opens): %w", ErrDialect, d, s, err)
	}
	return err
}

// retryable reports whether err is a server error after which the write
// may simply be run again.
func (d Dialect) retryable(err error) bool {
	k, ok := d.serverError(err)
	return ok && k == kindRetryable
}

// terminated reports whether err says the server ended the session (MySQL
// 1927, connection killed; PostgreSQL 57P01, terminated by an
// administrator command).
func (d Dialect) terminated(err error) bool {
	var me *mysql.MySQLError
	var pe sqlStateError
	switch d {
	case MySQL:
		return errors.As(err, &me) && me.Number == 1927
	case PostgreSQL:
		return errors.As(err, &pe) && pe.SQLState() == "57P01"
	}
	return false
}

// lostInTx reports whether err, from a statement inside a transaction,
// says its connection was gone: the server ended it (go-sql-driver/mysql
// reads a killed connection's end as an unexpected EOF), or the network
// broke. The transaction cannot commit any more.
func lostInTx(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}
