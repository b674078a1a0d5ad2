package sqlpreempt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/internal/pgtag"
)

// endPostgres ends, on PostgreSQL, the transaction holding the row when
// every token it carries is older than the claim's (its tag,
// internal/pgtag), and describes what it left or could not end. The
// waiter's own process id is not known through database/sql: the holder
// is found by the row's xmax, which needs the row to have existed before
// the holder's transaction.
func (w Watch) endPostgres(ctx context.Context, conn *sql.Conn) error {
	xmax := "SELECT xmax::text FROM " + w.Row.Table + " WHERE " + w.where(2)
	rows, err := conn.QueryContext(ctx, pgtag.BlockersSQL(xmax), append([]any{int64(0)}, w.Row.Values...)...)
	if err != nil {
		return fmt.Errorf("looking at what blocks it: %w", err)
	}
	type blocker struct {
		pid int64
		tag string
		xid sql.NullString
	}
	var bs []blocker
	for rows.Next() {
		var b blocker
		if err := rows.Scan(&b.pid, &b.tag, &b.xid); err != nil {
			rows.Close()
			return fmt.Errorf("looking at what blocks it: %w", err)
		}
		bs = append(bs, b)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("looking at what blocks it: %w", err)
	}
	rows.Close()
	me := pgtag.Waiter{Claims: []pgtag.Claim{{Hash: pgtag.Hash(w.Resource), Token: int64(w.Token)}}}
	var errs []error
	for _, b := range bs {
		tag, ok := pgtag.Parse(b.tag)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("blocked by session %d, which is no fenced transaction (application_name %q)", b.pid, b.tag))
		case claimedElsewhere(tag, me.Claims[0].Hash):
			errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of tokens %d to %d on other resources, which holds the row without having claimed it", b.pid, tag.Lo, tag.Hi))
		case !me.Ends(tag):
			errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of tokens %d to %d, not all older than this one's", b.pid, tag.Lo, tag.Hi))
		default:
			if _, err := conn.ExecContext(ctx, pgtag.TerminateSQL, b.pid, b.tag, b.xid); err != nil {
				errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of older tokens (%d to %d), which could not be ended (the role needs to be the blocker's, or to have pg_signal_backend for a role that is no superuser): %w", b.pid, tag.Lo, tag.Hi, err))
			}
		}
	}
	return errors.Join(errs...)
}

// claimedElsewhere reports whether tag lists every claim of its
// transaction and none of them is of the resource whose hash is hash: the
// transaction holds the row through a write of its own that claimed
// nothing (an unfenced statement in a transaction fenced on other
// resources), and was never the row's holder. pgtag's Waiter.Ends would
// end it when its tokens are all older than the claim's, a comparison of
// tokens of other resources' locks, whose holders may hold them still.
func claimedElsewhere(tag pgtag.Tag, hash string) bool {
	if !tag.Complete || len(tag.Entries) == 0 {
		return false
	}
	_, named := tag.Entries[hash]
	return !named
}
