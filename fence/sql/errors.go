package sqlfence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// handle, function or context, an empty or duplicated column assignment.
// Nothing was sent to the server. It matches [fence.ErrInvalidArgument],
// and [ErrInvalidOption] and [ErrInvalidIdentifier] match it.
var ErrInvalidArgument = errfamily.New("sqlfence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an option was nil or had an invalid value (a
// negative retry count, a read-only transaction), or a [Dialect] was not
// one of this package's. Nothing was sent to the server.
var ErrInvalidOption = errfamily.New("sqlfence: invalid option", ErrInvalidArgument)

// ErrInvalidIdentifier means a table or column name was empty, had an
// empty part, contained a NUL byte, was not valid UTF-8 or was longer than
// the dialect allows (64 characters in MySQL, 63 bytes in PostgreSQL).
// Nothing was sent to the server.
var ErrInvalidIdentifier = errfamily.New("sqlfence: invalid identifier", ErrInvalidArgument)

// ErrDialect means the database answered a statement as a server of
// another [Dialect] than the one the Table, Fences or Store was given (a
// MySQL Table used on SQLite): the statement was refused, and nothing was
// written. The error names both dialects; the driver's error stays
// reachable with errors.As. It matches [ErrInvalidArgument].
var ErrDialect = errfamily.New("sqlfence: the database is not of the dialect given", ErrInvalidArgument)

// ErrRowNotFound means a fenced update ([Table.Update]) found no row with
// the given key. Nothing was written.
var ErrRowNotFound = errors.New("sqlfence: no row with that key")

// ErrSchema means the server reported that a table or column the call
// names does not exist, or that the key column has no unique constraint
// for an upsert. Nothing was written. The driver's error stays reachable
// with errors.As.
var ErrSchema = errors.New("sqlfence: table, column or key constraint missing")

// ErrRetryable means the server rolled a statement or transaction back to
// break a deadlock or a serialization conflict (MySQL 1213, PostgreSQL
// 40001 and 40P01), gave up waiting for a lock (MySQL 1205), or could not
// take SQLite's write lock (SQLITE_BUSY, SQLITE_LOCKED). Nothing was
// written by the statement. Single-statement writes and the start of a
// fenced transaction are tried again by this package ([WithRetries]); the
// error is returned when the tries run out, when it hit a statement of the
// caller's own transaction or function (MySQL then has rolled back the
// whole transaction), or during COMMIT. Running the whole write again with
// the same token is safe.
var ErrRetryable = errors.New("sqlfence: rolled back by the server (deadlock, serialization failure or busy lock); retry it")

// ErrUnsupported means the server lacks a feature the call needs: SQLite
// before 3.24.0 has no INSERT ... ON CONFLICT DO UPDATE. Nothing was
// written.
var ErrUnsupported = errors.New("sqlfence: the server does not support this statement")

// ErrTerminated means the connection a fenced transaction ran on ended
// before the transaction did: the server ended it (MySQL and MariaDB: KILL
// CONNECTION, which go-sql-driver/mysql reports as an invalid connection
// or 1927; PostgreSQL: 57P01), or the network broke. A newer holder's
// fenced transaction ends an older token's transaction that blocks it that
// way (see "A frozen holder" in the package doc). A transaction whose
// COMMIT had not been sent was rolled back: nothing of it was written.
// When the COMMIT was in flight the error also matches
// [fence.ErrUnknownOutcome]. The driver's error stays reachable.
var ErrTerminated = errors.New("sqlfence: the transaction's connection ended before the transaction did (ended by the server, as a newer holder ends an older token's transaction that blocks it, or broken)")

// ErrNotClaimed means [Outbox.Record] was given an effect whose Resource
// is not fenced with its Token in the fence table: the transaction did not
// claim that resource with that token ([Fences.RunInTx] raising it first),
// and a newer holder may have. The effect was not recorded, and the
// transaction should be rolled back (returning the error from the fenced
// function does). It matches [ErrInvalidArgument].
var ErrNotClaimed = errfamily.New("sqlfence: outbox: the effect's resource is not fenced with its token", ErrInvalidArgument)
