package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
)

// A holder reads a row it claimed already (its fence is the holder's
// token) as often as it likes: in autocommit that read need not write.
// Once the first claim has committed, every write with a lower token is
// refused, so the row as last committed is what the holder would read
// after claiming it again; a newer holder's claim that commits before the
// read's snapshot shows a fence above the token (and the read refuses),
// one that commits after it comes after the read.
//
// In a transaction the claim stays a write, whatever the fence: its row
// lock, kept to the transaction's end, is what keeps an older holder's
// write from landing between the read and the transaction's own write.

// autocommit reports whether a statement run on c commits by itself: c is
// a connection of pgx's with no transaction open. A handle of any other
// kind may be in one.
func autocommit(c DB) bool {
	conn := connOf(c)
	return conn != nil && conn.PgConn() != nil && conn.PgConn().TxStatus() == 'I'
}

// claimedSQL builds the read of readClaimed: the row's fence, then rets
// ($1 is the key).
func (t *Table) claimedSQL(rets string) string {
	return "SELECT " + t.fence + ", " + rets + " FROM " + t.name + " WHERE " + t.key + " = $1"
}

// readClaimed is GetForUpdate in autocommit where the row's fence is
// token already: a plain read, run on c, that writes nothing and waits
// for no lock. It reports whether it decided the call; it did not when the
// fence is below token (the holder's first claim), which is then to be
// made as a write. Its failures are definite: a read claims nothing.
func (t *Table) readClaimed(ctx context.Context, c DB, key any, token fence.Token, rets string, dest []any) (bool, error) {
	r := &claimedRow{token: token, dest: dest}
	err := c.QueryRow(ctx, t.claimedSQL(rets), key).Scan(r)
	switch {
	case isNoRows(err):
		return true, fmt.Errorf("%w: %s", ErrRowNotFound, t.resource(key))
	case err != nil:
		return true, fmt.Errorf("postgres: fenced read of %s: %w", t.resource(key), classify(err))
	case r.fence == nil:
		return true, fmt.Errorf("%w: %s has a NULL %s column; declare it NOT NULL DEFAULT 0", ErrSchema, t.resource(key), t.fenRaw)
	case fence.Token(*r.fence) > token:
		return true, &fence.StaleError{Resource: t.resource(key), Token: token, Current: fence.Token(*r.fence)}
	}
	return fence.Token(*r.fence) == token, nil
}

// claimedRow scans claimedSQL's row: the fence, then the columns into
// dest only when the fence is the token, so that a read that refuses, or
// claims next, leaves dest as it was.
type claimedRow struct {
	token fence.Token
	dest  []any
	fence *int64
}

// ScanRow implements pgx.RowScanner.
func (r *claimedRow) ScanRow(rows pgx.Rows) error {
	all := make([]any, 1+len(r.dest))
	all[0] = &r.fence
	if err := rows.Scan(all...); err != nil {
		return err
	}
	if r.fence == nil || fence.Token(*r.fence) != r.token {
		return nil
	}
	all[0] = nil
	copy(all[1:], r.dest)
	return rows.Scan(all...)
}
