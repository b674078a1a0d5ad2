// Package gormfence makes writes through GORM (gorm.io/gorm) fenced: an
// update carrying an older [fence.Token] than one the row has already
// accepted is refused by the database itself, in the update's own
// statement, however late it arrives. It is fence/sql's [sqlfence.Table]
// for GORM models, on MySQL and MariaDB, PostgreSQL and SQLite.
//
// A model opts in with a fence column, an integer that starts below every
// token: a field named Fence, or any integer field tagged gorm:"fence":
//
//	type Account struct {
//		ID      string `gorm:"primaryKey"`
//		Balance int64
//		Fence   int64 `gorm:"not null;default:0"`
//	}
//
// Register the [Plugin] once, after gorm.Open, then mark updates with the
// [Fenced] scope:
//
//	if err := db.Use(gormfence.Plugin{}); err != nil {
//		return err
//	}
//	err := db.WithContext(ctx).Scopes(gormfence.Fenced(lock.Token())).
//		Model(&Account{ID: "acct-7"}).Update("balance", 120).Error
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing changed.
//	case errors.Is(err, gormfence.ErrRowNotFound):
//		// No such account.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// Read back before deciding.
//	}
//
// The update is one statement, UPDATE accounts SET balance = ?, fence = ?
// WHERE id = ? AND fence <= ?; what refused it is told by a read of the
// row after it changed none. Update, Updates, UpdateColumn(s) and Save of
// an existing row are fenced; a create, delete or query marked Fenced is
// refused, as is an update that names no row.
//
// # Reading before you write
//
// A fenced write alone does not keep an update computed from a read: a
// newer holder that reads before an older holder's late write lands, and
// then writes, writes over an acknowledged update. The first touch claims
// the row: [Claim] raises its fence to the token, then reads it, so no
// older write lands after the read. [Update] is the whole
// read-compute-write in one transaction: the claim, your function, and the
// fenced write of the model, with the row locked from the claim to the
// commit.
//
// # A holder frozen inside Update
//
// A holder frozen inside [Update] (a GC pause, a stopped process) keeps
// its transaction open and its row locked past its lease. On MariaDB
// (and MySQL 5.7) and PostgreSQL a claim ([Claim], and Update's) that has waited
// [Plugin].PreemptAfter (100 ms) on its row looks, on another connection
// of the pool, at the transaction holding it, and ends it (KILL
// CONNECTION, pg_terminate_backend) when it claimed the row with an older
// token; the frozen holder's Update then fails with
// [sqlfence.ErrTerminated], nothing of it written. A holder of the same
// token or a newer one, and a transaction that is not fenced, are left
// alone. On PostgreSQL a claim tags its transaction (its application_name,
// for the transaction alone) so that a newer claim can tell it. The user
// needs PROCESS on MariaDB (and CONNECTION ADMIN to end another user's
// connection); the PostgreSQL role, to be the blocker's or to have
// pg_signal_backend. SQLite has no other session to end: busy_timeout
// bounds the wait. docs/gorm.md has the limits.
//
// # Errors
//
// A refused write matches [fence.ErrStale] (a [*fence.StaleError] with the
// row's fence as Current) and changed nothing. No row is [ErrRowNotFound],
// which matches gorm.ErrRecordNotFound too, never ErrStale. A statement or
// COMMIT whose answer was lost matches [fence.ErrUnknownOutcome]; deadlocks
// and busy locks match [sqlfence.ErrRetryable], and running the write again
// with the same token is safe. These are fence/sql's rules
// ([sqlfence.Dialect.WriteError], [sqlfence.Dialect.CommitError]), read
// from the dialector's name. Bad input (a nil *gorm.DB, context, model or
// function, a token <= 0, a model without a fence column or a primary key
// value, the plugin not registered) gives an error matching
// [fence.ErrInvalidArgument] that says what to add, before any I/O.
//
// # Drivers
//
// This package imports gorm.io/gorm and fence/sql, no database driver. The
// tests use gorm.io/driver/mysql, gorm.io/driver/postgres and
// github.com/glebarez/sqlite, a pure-Go SQLite dialector over the same
// SQLite as modernc.org/sqlite; gorm.io/driver/sqlite links
// github.com/mattn/go-sqlite3, which needs cgo, even when given a
// *sql.DB of another driver; with it, a busy database is not matched as
// [sqlfence.ErrRetryable] (its error has no Code method).
package gormfence
