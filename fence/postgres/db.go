package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what fenced statements need from a pgx handle. *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all implement it. A statement run through a pgx.Tx
// lands only when that transaction commits.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner is what fenced transactions need from a pgx handle.
// *pgxpool.Pool, *pgx.Conn and pgx.Tx (which begins a savepoint) all
// implement it.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ DB         = (*pgxpool.Pool)(nil)
	_ DB         = (*pgx.Conn)(nil)
	_ DB         = pgx.Tx(nil)
	_ TxBeginner = (*pgxpool.Pool)(nil)
	_ TxBeginner = (*pgx.Conn)(nil)
	_ TxBeginner = pgx.Tx(nil)
)

// acquirer is a pool. A write takes a connection of its own from it so that
// it can tell, after a failure, whether the connection broke mid-request.
type acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// withConn runs fn on db, or on a connection acquired from db when db is a
// pool. An error acquiring the connection is returned as it is: nothing was
// sent.
func withConn(ctx context.Context, db DB, fn func(DB) error) error {
	p, ok := db.(acquirer)
	if !ok {
		return fn(db)
	}
	c, err := p.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: acquire connection: %w", err)
	}
	defer c.Release()
	return fn(c)
}

// connClosed reports whether the connection under db is closed, and whether
// it could tell.
func connClosed(db DB) (closed, known bool) {
	switch c := db.(type) {
	case *pgx.Conn:
		return c.IsClosed(), true
	case *pgxpool.Conn:
		return c.Conn().IsClosed(), true
	case pgx.Tx:
		return c.Conn().IsClosed(), true
	}
	return false, false
}
