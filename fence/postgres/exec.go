package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
)

// staleMarker is cast to bigint, and so raises an error naming it, when the
// guard of a one-statement fenced write refuses the token.
const staleMarker = "fencelock: stale token, write refused/"

// Exec runs one statement fenced on resource in the [DefaultFenceTable]; see
// [Fences.Exec].
func Exec(ctx context.Context, db DB, resource string, token fence.Token, sql string, args ...any) (int64, error) {
	return defaultFences.Exec(ctx, db, resource, token, sql, args...)
}

// Exec runs sql, one INSERT, UPDATE or DELETE without RETURNING, fenced on
// resource as if by [Fences.RunInTx], but in a single statement and round
// trip: the fence is raised in a data-modifying CTE of the same statement,
// and if it is already higher than token the statement fails as a whole, so
// sql's writes are undone, and Exec returns a [*fence.StaleError]. Otherwise
// it returns the number of rows sql affected.
//
// args are sql's parameters $1...$n; Exec adds the resource and token as
// $n+1 and $n+2. The fence is raised before sql's rows are touched, in the
// same order as [Fences.RunInTx], which avoids deadlocks between the two.
//
// Errors are those of [Table.Update]; a failure of the statement, including
// a refusal, aborts the transaction when db is a pgx.Tx. ctx bounds the call.
func (f *Fences) Exec(ctx context.Context, db DB, resource string, token fence.Token, sql string, args ...any) (int64, error) {
	if err := checkWrite(ctx, db, resource, token); err != nil {
		return 0, err
	}
	stmt, err := writeStatement(sql)
	if err != nil {
		return 0, err
	}
	full := f.execSQL(stmt, len(args))
	all := append(append(make([]any, 0, len(args)+2), args...), resource, int64(token))
	var n int64
	err = withConn(ctx, db, func(c DB) error {
		err := c.QueryRow(ctx, full, all...).Scan(&n)
		switch {
		case isStaleMarker(err):
			return f.stale(ctx, c, resource, token)
		case err != nil:
			return writeError(c, "fenced write on", resource, token, err)
		}
		return nil
	})
	return n, err
}

// execSQL wraps stmt, whose own parameters are $1..$n, with the guard.
func (f *Fences) execSQL(stmt string, n int) string {
	guard := f.guardSQL("$"+strconv.Itoa(n+1), "$"+strconv.Itoa(n+2))
	// The CASE reads the guard first, so the fence row is locked before
	// stmt's rows; when the guard refused, the cast fails and with it the
	// whole statement. Casting a column of the CTE, not a constant, keeps
	// the planner from folding the error into every execution.
	return "WITH fencelock_guard AS (" + guard + " RETURNING 1), fencelock_write AS (" + stmt + " RETURNING 1) " +
		"SELECT CASE WHEN (SELECT count(*) FROM fencelock_guard) = 0 " +
		"THEN (SELECT '" + staleMarker + "' || count(*) FROM fencelock_guard)::bigint " +
		"ELSE (SELECT count(*) FROM fencelock_write) END"
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
