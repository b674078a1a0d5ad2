package postgres

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate is the read before a fenced write: it claims the row whose
// key is key for token and scans the row's columns, as they were, into
// dest, as pgx's Row.Scan does (one destination per column), in one
// statement (but see autocommit below):
//
//	UPDATE t SET fence = $2 WHERE key = $1 AND fence <= $2 RETURNING c1, ...
//
// Once it returns, every write to the row with a lower token is refused
// ([Table.Update], [Table.Upsert], and SQL in a fenced transaction when the
// table has the trigger of [Table.CreateTrigger]), so what it read cannot
// be overwritten by an older holder's late write before yours lands. A
// plain SELECT claims nothing: a newer holder that computes its write from
// it can lose an older holder's write that lands after the read, with no
// error on either side (see "Reading before you write" in the package
// documentation).
//
// Run it in the transaction that writes (db a pgx.Tx, as [RunInTxAll]
// gives): the row then stays locked, as by SELECT ... FOR UPDATE, until
// that transaction ends, and an older holder's uncommitted write to it
// makes GetForUpdate wait for that holder's transaction and read what it
// committed. Through a pool or connection in autocommit the claim commits
// at once and the row is not locked after the call; there a claim the
// holder made already costs a read:
//
//	SELECT fence, c1, ... FROM t WHERE key = $1
//
// and when the row's fence is token, that is all: no write, no lock
// waited for, nothing for the server to commit. The first claim (a fence
// below token) is that read, then the UPDATE above: two round trips and a
// write. What a read returns is the row as last committed: a newer
// holder's claim committed before it is refused ([fence.ErrStale]), one
// committed after it comes after the read; an older holder's write cannot
// land once the first claim has committed.
//
// columns may name any of the table's columns, the key and fence columns
// included (the fence column reads token); with none, GetForUpdate only
// claims the row. A column the table lacks fails with an error matching
// [ErrSchema] that names it. A number of destinations other than
// len(columns), or an unusable column name, fails before any I/O with an
// error matching [ErrInvalidArgument].
//
// When the row's fence is higher than token it returns a [*fence.StaleError]
// (matching [fence.ErrStale], with the row's fence as Current) and claims
// nothing; when there is no row, an error matching [ErrRowNotFound]. A row
// that does not exist cannot be claimed: create it first with
// [Table.Upsert], which is fenced too (with no assignments it creates the
// row with its columns' defaults), or claim its name in the fence table
// with [RunInTxAll]. Other errors, and the role of ctx, are those of
// [Table.Update]; the key column must be unique, as for Update; a read in
// autocommit claims nothing, and its failures are definite ones. A claim
// that writes (each one in a transaction, the first in autocommit) is an
// UPDATE of the row, so the table's UPDATE triggers fire for it, and a
// BEFORE UPDATE trigger that changes a column changes what it reads; a
// read fires none.
func (t *Table) GetForUpdate(ctx context.Context, db DB, key any, token fence.Token, columns []string, dest ...any) error {
	if err := cmp.Or(t.check(), checkWrite(ctx, db, key, token)); err != nil {
		return err
	}
	rets, err := t.returning(columns, dest)
	if err != nil {
		return err
	}
	if len(columns) == 0 {
		dest = []any{new(bool)}
	}
	return withConn(ctx, db, func(c DB) error {
		if err := t.checkUniqueKey(ctx, c); err != nil {
			return err
		}
		if autocommit(c) {
			if done, err := t.readClaimed(ctx, c, key, token, rets, dest); done {
				return err
			}
		}
		return t.claimRead(ctx, db, c, key, token, t.readSQL(rets), dest)
	})
}

// claimRead is GetForUpdate's claim as a write: the UPDATE of readSQL, run
// in c (from db).
func (t *Table) claimRead(ctx context.Context, db, c DB, key any, token fence.Token, sql string, dest []any) error {
	resource := t.resource(key)
	_, err := watched(ctx, t.preemptAfter, db, c, resource, token, t.xmaxSQL, key, func() (struct{}, error) {
		sql, args := tagging(c, sql, true, resource, token, []any{key, int64(token)})
		if len(args) > 2 {
			return struct{}{}, c.QueryRow(ctx, sql, args...).Scan(append(dest, nil)...)
		}
		return struct{}{}, c.QueryRow(ctx, sql, args...).Scan(dest...)
	})
	switch {
	case isNoRows(err):
		return t.refused(ctx, c, key, t.resource(key), token, true)
	case err != nil:
		return writeError(c, "claim", t.resource(key), token, err)
	}
	return nil
}

// returning checks GetForUpdate's columns and destinations and returns
// the columns quoted, or "true" for none.
func (t *Table) returning(columns []string, dest []any) (string, error) {
	if len(columns) != len(dest) {
		return "", fmt.Errorf("%w: GetForUpdate: %d columns and %d destinations", ErrInvalidArgument, len(columns), len(dest))
	}
	if err := checkDests(columns, dest); err != nil {
		return "", err
	}
	ret := make([]string, len(columns))
	for i, c := range columns {
		q, err := quoteIdent("column", c)
		if err != nil {
			return "", err
		}
		ret[i] = q
	}
	if len(ret) == 0 {
		ret = []string{"true"}
	}
	return strings.Join(ret, ", "), nil
}

// readSQL builds GetForUpdate's claim, returning rets: $1 is the key, $2
// the token.
func (t *Table) readSQL(rets string) string {
	return "UPDATE " + t.name + " SET " + t.fence + " = $2 WHERE " + t.key + " = $1 AND " + t.fence + " <= $2 RETURNING " + rets
}

// checkDests refuses, before the claim is made, a destination that cannot
// be scanned into: anything but nil (the column skipped, as pgx does) or a
// non-nil pointer.
func checkDests(columns []string, dest []any) error {
	for i, d := range dest {
		if d == nil {
			continue
		}
		if v := reflect.ValueOf(d); v.Kind() != reflect.Pointer || v.IsNil() {
			return fmt.Errorf("%w: GetForUpdate: destination for column %q is a %T, not a pointer", ErrInvalidArgument, columns[i], d)
		}
	}
	return nil
}
