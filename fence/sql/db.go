package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// DB is what fenced statements need from a database/sql handle. *sql.DB,
// *sql.Conn and *sql.Tx all implement it. A statement run through a
// *sql.Tx lands only when that transaction commits.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// TxBeginner is what fenced transactions need: *sql.DB and *sql.Conn
// implement it.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ DB         = (*sql.DB)(nil)
	_ DB         = (*sql.Conn)(nil)
	_ DB         = (*sql.Tx)(nil)
	_ TxBeginner = (*sql.DB)(nil)
	_ TxBeginner = (*sql.Conn)(nil)
)

// inTx reports whether db is the caller's transaction.
func inTx(db DB) bool {
	_, ok := db.(*sql.Tx)
	return ok
}

// checkDB refuses a nil handle, including a typed nil such as a nil
// *sql.DB, which would otherwise panic on first use.
func checkDB(db any) error {
	switch {
	case db == nil:
		return fmt.Errorf("%w: nil DB", ErrInvalidArgument)
	case nilcheck.IsNil(db):
		return fmt.Errorf("%w: nil %T", ErrInvalidArgument, db)
	}
	return nil
}

// checkCtx refuses a nil context with an error rather than a panic, and
// returns the context's error if it has ended.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}
