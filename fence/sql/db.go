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

// sendOnce runs fn with a handle that sends each statement once: db
// itself, except a *sql.DB of PostgreSQL, for which it is a connection of
// the pool's own (*sql.Conn), given back after fn. There pgx's
// database/sql driver turns an answer it lost into driver.ErrBadConn, and
// a *sql.DB answers that by sending the statement again on another
// connection: an Add applied twice, or a Store's Update whose second copy,
// finding its own value, reads as a change and runs fn again, all reported
// as nil (TestWriteAnswerLostPostgreSQL). A *sql.Conn sends it once, and
// its ErrBadConn is an unknown outcome ([Dialect.WriteError]). Taking the
// connection sends nothing: its failure is a definite one.
func sendOnce(ctx context.Context, d Dialect, db DB, fn func(DB) error) error {
	pool, ok := db.(*sql.DB)
	if !ok || d != PostgreSQL {
		return fn(db)
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlfence: taking a connection from the pool (nothing sent): %w", err)
	}
	defer conn.Close()
	return fn(conn)
}
