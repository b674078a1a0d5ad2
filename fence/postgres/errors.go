package postgres

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// handle, function or context, an empty or duplicated column assignment.
// Nothing was sent to the server. It matches [fence.ErrInvalidArgument],
// and [ErrInvalidOption] and [ErrInvalidIdentifier] match it.
var ErrInvalidArgument = errfamily.New("postgres: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means a [TableOption] given to [NewTable], an [Option]
// given to [NewFences] or [NewStore], or a [TxOption] given to [RunInTx] was
// nil, had an invalid value (a nil provider), or does not apply to the
// handle (transaction options on a pgx.Tx). An invalid column name also
// matches [ErrInvalidIdentifier]. Nothing was sent to the server.
var ErrInvalidOption = errfamily.New("postgres: invalid option", ErrInvalidArgument)

// ErrInvalidIdentifier means a table or column name was empty, had an empty
// part, contained a NUL byte or was longer than PostgreSQL's 63 bytes.
// Nothing was sent to the server.
var ErrInvalidIdentifier = errfamily.New("postgres: invalid identifier", ErrInvalidArgument)

// ErrRowNotFound means a fenced update ([Table.Update]) found no row with the
// given key. Nothing was written. Use [Table.Upsert] to create rows on the
// first write.
var ErrRowNotFound = errors.New("postgres: no row with that key")

// ErrSchema means the server reported that a table or column the call names
// does not exist (SQLSTATE 42P01, 42703), or that the key column has no
// unique constraint for an upsert (42P10); errors for these also wrap the
// server's *pgconn.PgError. It also means that the first write of a
// [Table] found, in the catalog, no key or fence column of the names it was
// given, or ([Table.Update]) no unique index on the key column alone.
// Nothing was written.
var ErrSchema = errors.New("postgres: table, column or key constraint missing")

// ErrRetryable means the server rolled the transaction (or statement) back
// because it could not serialise it with a concurrent one (SQLSTATE 40001,
// serialization_failure) or to break a deadlock (40P01). Nothing was written;
// running the whole transaction again with the same token is safe and may
// succeed, or may then fail with [fence.ErrStale]. Errors that match it also
// wrap the server's *pgconn.PgError.
var ErrRetryable = errors.New("postgres: transaction rolled back by the server (serialization failure or deadlock); retry it")

// ErrTerminated means the server ended the session a fenced transaction
// ran on (SQLSTATE 57P01, "terminating connection due to administrator
// command") before the transaction ended. A newer holder's fenced
// transaction does that to an older token's transaction that blocks its
// guard (see "A frozen holder" in the package doc); pg_terminate_backend
// and a server shutdown send the same code. A transaction whose COMMIT had
// not been sent was rolled back: nothing of it was written. When the
// COMMIT was in flight the error also matches [fence.ErrUnknownOutcome].
// Errors that match it also wrap the server's *pgconn.PgError.
var ErrTerminated = errors.New("postgres: the server ended the transaction's session (SQLSTATE 57P01): a newer holder ends an older token's transaction that blocks it, as do pg_terminate_backend and a server shutdown")

// ErrNotClaimed means [Outbox.Record] found an effect whose resource's
// fence row does not carry the effect's token: there is none, or it is
// lower (the transaction did not claim the resource with that token, as
// [RunInTx] does), or it is higher (a newer holder claimed it, or the
// transaction claimed it with another token; the error then also wraps a
// [*fence.StaleError] with the fence's token as Current). The server
// refused the statement: nothing was recorded, and the caller's
// transaction is aborted. It matches [fence.ErrInvalidArgument], as the
// other stores' refusal, before any I/O, of an effect their write does
// not claim does.
var ErrNotClaimed = errfamily.New("postgres: outbox effect's resource is not claimed with its token", fence.ErrInvalidArgument)
