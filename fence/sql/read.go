package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate reads the columns cols of the row whose key is key into
// dest (one per column, as [sql.Row.Scan] takes them), after raising the
// row's fence to token in the same atomic step: it is the read to make
// before a write computed from what it reads. Once it returns, a write to
// the row with a lower token is refused, so an older holder's late write
// cannot land between this read and your write and be lost under it.
//
// A claim the holder made already (the row's fence is token) is a read,
// with no write: outside a transaction, and in MySQL and MariaDB in one
// too, GetForUpdate first reads
//
//	SELECT fence, c1, ... FROM t WHERE key = ?
//
// (in a MySQL transaction, SELECT ... FOR UPDATE, a locking read, which
// reads the newest row, not a REPEATABLE READ snapshot, and locks it), and
// when the fence is token, that is all: one round trip. When it is below
// token, the holder's first claim, the claim follows as a write, which
// reads the row again. PostgreSQL and SQLite (3.35.0 or later) claim in
// one statement:
//
//	UPDATE t SET fence = ? WHERE key = ? AND fence <= ? RETURNING fence, c1, ...
//
// MySQL and MariaDB, which have no UPDATE ... RETURNING, in two: the
// fence's UPDATE (which locks the row), then SELECT fence, c1, ... FOR
// UPDATE. In a transaction of PostgreSQL or SQLite the claim is that
// UPDATE alone, whatever the fence: it takes the row's lock (SQLite's write
// lock), which a plain read would not.
//
// Pass your transaction as db: the row then stays locked until it ends,
// and a transaction of an older holder that already wrote the row makes
// the read wait for its end, then read what it committed (in SQLite, with
// no busy_timeout, the read fails with [ErrRetryable] instead, as any
// second writer would). Outside a transaction (db a *sql.DB, or a
// *sql.Conn, which is taken to be outside one: pass the *sql.Tx of a
// transaction) the first claim commits at once and what a read returns is
// the row as last committed: a newer holder's claim committed before it
// is reported as [fence.ErrStale], one committed after it is not seen.
// Read the rows of one transaction in key order (as
// [Fences.RunInTxAll] raises its fences): two transactions that lock two
// rows in opposite orders deadlock, and the server rolls one back
// ([ErrRetryable]).
//
// If the row's fence is above token it returns a [*fence.StaleError]
// (matching [fence.ErrStale]) and changes nothing; if there is no such row,
// an error matching both [fence.ErrNotFound] and [ErrRowNotFound]. A
// column the table lacks fails with [ErrSchema] and claims nothing. cols
// may be empty: the call then only claims the row. On any error dest may
// have been written in part. A row that does not exist cannot be claimed:
// create it first with [Table.Upsert], which is fenced too. A claim that
// writes is an UPDATE of the row: the table's UPDATE triggers fire for it;
// a read fires none. Column names are quoted for the dialect; a key that is not a string
// goes as a parameter too. Bad input (cols and dest of different lengths,
// a nil dest, an unusable column name, and what [Table.Update] refuses)
// gives an error matching [ErrInvalidArgument] before any I/O. Retries
// and unknown outcomes are as for Table.Update; a read that fails claimed
// nothing, and its failure is a definite one.
func (t *Table) GetForUpdate(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest ...any) error {
	q, err := t.prepareRead(ctx, db, key, token, cols, dest)
	if err != nil {
		return err
	}
	read := func() error { return t.readRow(ctx, db, key, token, q, dest) }
	if inTx(db) {
		return once(ctx, t.d, t.tel, read)
	}
	return retry(ctx, t.d, t.retries, t.tel, read)
}

// prepareRead checks GetForUpdate's arguments, before any I/O, and
// returns its columns, quoted.
func (t *Table) prepareRead(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest []any) ([]string, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := checkWrite(ctx, db, key, token); err != nil {
		return nil, err
	}
	if len(cols) != len(dest) {
		return nil, fmt.Errorf("%w: GetForUpdate: %d columns but %d destinations", ErrInvalidArgument, len(cols), len(dest))
	}
	q := make([]string, len(cols))
	for i, c := range cols {
		var err error
		if q[i], err = quoteIdent(t.d, "column", c); err != nil {
			return nil, err
		}
		if v := reflect.ValueOf(dest[i]); dest[i] == nil || v.Kind() != reflect.Pointer || v.IsNil() {
			return nil, fmt.Errorf("%w: GetForUpdate: destination for column %q is a %T, not a pointer", ErrInvalidArgument, c, dest[i])
		}
	}
	return q, nil
}

// readRow is one try of GetForUpdate. The columns are qualified with the
// table's name: SQLite reads a double-quoted name that is no column as a
// string, unless it is qualified (by the table's own name: RETURNING
// knows no alias, nor the schema).
func (t *Table) readRow(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest []any) error {
	if t.d == MySQL || !inTx(db) {
		if done, err := t.readClaimed(ctx, db, key, token, cols, dest); done {
			return err
		}
	}
	if t.d == MySQL {
		return t.claimThenSelect(ctx, db, key, token, cols, dest)
	}
	return t.claimReturning(ctx, db, key, token, cols, dest)
}

// claimReturning is the claim as a write in PostgreSQL and SQLite: one
// UPDATE ... RETURNING.
func (t *Table) claimReturning(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest []any) error {
	s := (&stmt{d: t.d}).sql("UPDATE ", t.name, " SET ", t.fence, " = ").arg(int64(token)).
		sql(" WHERE ", t.key, " = ").arg(key).sql(" AND ", t.fence, " <= ").arg(int64(token)).sql(" RETURNING ", t.base, ".", t.fence)
	for _, c := range cols {
		s.sql(", ", t.base, ".", c)
	}
	var fen int64
	err := db.QueryRowContext(ctx, s.String(), s.args...).Scan(append([]any{&fen}, dest...)...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return t.whyNoRow(ctx, db, key, token)
	case scanFailed(err):
		return fmt.Errorf("sqlfence: fenced read of %s: the fence is raised, but the row could not be read into dest: %w", t.resource(key), err)
	case err != nil:
		return t.d.readError(ctx, db, t.resource(key), token, err)
	}
	return nil
}

// claimThenSelect is readRow in MySQL: the fence's UPDATE, which locks
// the row if it raises (or holds) the fence, then a locking read, whose
// fence tells what the UPDATE did. (The insert id cannot tell it,
// as it does for [Fences.Advance]: a trigger on the table that inserts
// resets it.)
func (t *Table) claimThenSelect(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest []any) error {
	resource := t.resource(key)
	s := (&stmt{d: t.d}).sql("UPDATE ", t.name, " SET ", t.fence, " = ").arg(int64(token)).
		sql(" WHERE ", t.key, " = ").arg(key).sql(" AND ", t.fence, " <= ").arg(int64(token))
	if _, err := t.stmts.exec(ctx, nil, db, s.String(), s.args...); err != nil {
		return t.d.writeError(db, "fenced read", resource, token, err)
	}
	return t.lockedRead(ctx, db, key, token, cols, dest)
}

// lockedRead is the SELECT ... FOR UPDATE of claimThenSelect.
func (t *Table) lockedRead(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest []any) error {
	resource := t.resource(key)
	sel := (&stmt{d: t.d}).sql("SELECT ", t.fence)
	for _, c := range cols {
		sel.sql(", ", c)
	}
	sel.sql(" FROM ", t.name, " WHERE ", t.key, " = ").arg(key).sql(" FOR UPDATE")
	var fen sql.NullInt64
	err := t.stmts.scan(ctx, db, sel.String(), sel.args, append([]any{&fen}, dest...)...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return t.notFound(resource, "")
	case scanFailed(err):
		return fmt.Errorf("sqlfence: fenced read of %s: the row could not be read into dest: %w", resource, err)
	case err != nil:
		return fmt.Errorf("sqlfence: fenced read of %s: %w", resource, t.d.classify(err))
	case !fen.Valid:
		return fmt.Errorf("%w: %s has a NULL %s column; declare it NOT NULL DEFAULT 0", ErrSchema, resource, t.fenRaw)
	case fence.Token(fen.Int64) > token: // refused, or a newer holder came between (outside a transaction)
		return &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(fen.Int64)}
	case fence.Token(fen.Int64) < token:
		return t.notFound(resource, "a row appeared since")
	}
	return nil
}

// scanFailed reports whether err is database/sql's refusal to convert a
// column for its destination: the statement ran.
func scanFailed(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "sql: Scan error on column")
}

// whyNoRow tells why a fenced read's claim found no row to raise: its
// fence is higher, or there is no row (or a row appeared after the claim
// looked, which the claim did not raise: not found as well, as it was
// when the claim ran). MySQL's read is a locking one, which sees the
// newest fence rather than a REPEATABLE READ snapshot.
func (t *Table) whyNoRow(ctx context.Context, db DB, key any, token fence.Token) error {
	resource := t.resource(key)
	s := (&stmt{d: t.d}).sql("SELECT ", t.fence, " FROM ", t.name, " WHERE ", t.key, " = ").arg(key)
	if t.d == MySQL {
		s.sql(" FOR UPDATE")
	}
	var cur sql.NullInt64
	err := db.QueryRowContext(ctx, s.String(), s.args...).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return t.notFound(resource, "")
	case err != nil:
		return fmt.Errorf("sqlfence: fenced read of %s found no row to raise, and reading it back failed: %w", resource, t.d.classify(err))
	case !cur.Valid:
		return fmt.Errorf("%w: %s has a NULL %s column; declare it NOT NULL DEFAULT 0", ErrSchema, resource, t.fenRaw)
	case fence.Token(cur.Int64) > token:
		return &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(cur.Int64)}
	}
	return t.notFound(resource, "a row appeared since")
}

// notFound is the error of a fenced read of a row that is not there.
func (t *Table) notFound(resource, why string) error {
	if why != "" {
		return fmt.Errorf("%w: %w: %s (%s)", fence.ErrNotFound, ErrRowNotFound, resource, why)
	}
	return fmt.Errorf("%w: %w: %s", fence.ErrNotFound, ErrRowNotFound, resource)
}
