package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/pgtag"
)

// staleMarker is cast to bigint, and so raises an error naming it, when the
// guard of [Fences.Exec] refuses the token.
const staleMarker = "fencelock: stale token, write refused/"

// Exec runs one statement fenced on resource in the [DefaultFenceTable]; see
// [Fences.Exec].
func Exec(ctx context.Context, db DB, resource string, token fence.Token, sql string, args ...any) (int64, error) {
	return defaultFences().Exec(ctx, db, resource, token, sql, args...)
}

// Exec runs sql, one INSERT, UPDATE or DELETE, fenced on resource as if by
// [Fences.RunInTx], in one round trip: the fence is raised by a statement of
// its own, sent with sql in one pgx batch and run with it in one transaction
// (an implicit one, or db's when db is a pgx.Tx). If the fence is already
// higher than token the guard fails, sql does not run, and Exec returns a
// [*fence.StaleError]. Otherwise it returns the number of rows sql affected.
//
// Because sql is a statement of its own, it takes its snapshot after the
// fence is raised, so under READ COMMITTED it sees every write committed by
// the holders it waited for on the fence, exactly as a statement run inside
// RunInTx does. (A guard in a CTE of sql's own statement would not: the
// statement's snapshot predates the wait.)
//
// args are sql's parameters $1...$n. The fence is raised before sql's rows
// are touched, in the same order as [Fences.RunInTx], which avoids deadlocks
// between the two. db must also have pgx's SendBatch method, as
// *pgxpool.Pool, *pgx.Conn and pgx.Tx do; other handles get
// [ErrInvalidArgument] before any I/O.
//
// Errors are those of [Table.Update]; a failure of either statement,
// including a refusal, aborts the transaction when db is a pgx.Tx. ctx bounds
// the call.
func (f *Fences) Exec(ctx context.Context, db DB, resource string, token fence.Token, sql string, args ...any) (int64, error) {
	if err := cmp.Or(f.check(), checkWrite(ctx, db, resource, token)); err != nil {
		return 0, err
	}
	stmt, err := writeStatement(sql)
	if err != nil {
		return 0, err
	}
	if _, ok := db.(batcher); !ok {
		return 0, fmt.Errorf("%w: Exec needs a handle with SendBatch (*pgxpool.Pool, *pgx.Conn, pgx.Tx), got %T", ErrInvalidArgument, db)
	}
	var n int64
	err = f.tel.write(ctx, f.tel.Exec, token, func() string { return resource }, func(ctx context.Context) error {
		return withConn(ctx, db, func(c DB) error {
			b := &pgx.Batch{}
			b.Queue(f.execGuardSQL, resource, int64(token), tagOf(c, int64(token), int64(token), pgtag.Entry(resource, int64(token))))
			b.Queue(stmt, args...)
			var err error
			// db has SendBatch, and so has a pool's connection.
			n, err = watched(ctx, defaultPreemptAfter, db, c, resource, token, f.xmaxSQL, []string{resource}, func() (int64, error) { return runBatch(ctx, c.(batcher), b) })
			switch {
			case isStaleMarker(err):
				return f.stale(ctx, c, resource, token)
			case err != nil:
				return writeError(c, "fenced write on", resource, token, err)
			}
			return nil
		})
	})
	return n, err
}

// batcher is the part of a pgx handle that sends a batch.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ batcher = (*pgxpool.Pool)(nil)
	_ batcher = (*pgxpool.Conn)(nil)
	_ batcher = (*pgx.Conn)(nil)
	_ batcher = pgx.Tx(nil)
)

// runBatch sends Exec's guard and statement and returns the statement's row
// count, or the first error: the guard's, the statement's, or the one that
// ended the batch (a failed implicit COMMIT, a broken connection).
func runBatch(ctx context.Context, c batcher, b *pgx.Batch) (int64, error) {
	br := c.SendBatch(ctx, b)
	_, guardErr := br.Exec()
	tag, stmtErr := br.Exec()
	closeErr := br.Close()
	if err := cmp.Or(guardErr, stmtErr, closeErr); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// execGuard is the guard of [Fences.Exec] as a statement of its own: it
// raises the fence and, when the fence refused, fails with an error naming
// staleMarker, so that the statement after it in the batch does not run.
func execGuard(guard string) string {
	// Casting a value computed from the CTE, not a constant, keeps the
	// planner from folding the error into every execution.
	return "WITH fencelock_guard AS (" + guard + ") " +
		"SELECT CASE WHEN count(*) = 0 THEN ('" + staleMarker + "' || count(*))::bigint ELSE 1 END FROM fencelock_guard"
}

// writeStatement checks that sql is one INSERT, UPDATE or DELETE (possibly
// with its own WITH) and strips trailing semicolons.
func writeStatement(sql string) (string, error) {
	s := strings.TrimRightFunc(strings.TrimSpace(sql), func(r rune) bool { return r == ';' || unicode.IsSpace(r) })
	word := s
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		word = s[:i]
	}
	switch strings.ToUpper(word) {
	case "INSERT", "UPDATE", "DELETE", "WITH":
		return s, nil
	}
	return "", fmt.Errorf("%w: Exec needs one INSERT, UPDATE or DELETE statement without RETURNING, got %.40q", ErrInvalidArgument, sql)
}

func isStaleMarker(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22P02" && strings.Contains(pgErr.Message, staleMarker)
}
