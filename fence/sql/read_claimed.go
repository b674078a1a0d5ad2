package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// A holder reads a row it claimed already (its fence is the holder's
// token) at the cost of a read: once the first claim has committed, every
// write with a lower token is refused, so the row as last committed is
// what the holder would read after claiming it again, and a newer
// holder's claim committed before the read shows a fence above the token
// (the read refuses). The claim stays a write where it must lock the row:
// in a transaction of PostgreSQL or SQLite, whose UPDATE takes the lock
// (SQLite's write lock) that keeps an older holder's write out until the
// transaction ends. In a MySQL transaction SELECT ... FOR UPDATE locks
// the row with no write.

// readClaimed is one try of GetForUpdate as a read of the row's fence and
// cols, and reports whether it decided the call. It did not when the
// row's fence is below token (the holder's first claim): the claim is
// then to be made as a write, which reads the row again. A read that
// failed claimed nothing: its failure is a definite one.
func (t *Table) readClaimed(ctx context.Context, db DB, key any, token fence.Token, cols []string, dest []any) (bool, error) {
	resource := t.resource(key)
	s := (&stmt{d: t.d}).sql("SELECT ", t.base, ".", t.fence)
	for _, c := range cols {
		s.sql(", ", t.base, ".", c)
	}
	s.sql(" FROM ", t.name, " WHERE ", t.key, " = ").arg(key)
	if t.d == MySQL && inTx(db) {
		// A locking read: the newest row, not a REPEATABLE READ
		// snapshot, and locked to the transaction's end.
		s.sql(" FOR UPDATE")
	}
	var fen sql.NullInt64
	err := t.stmts.scan(ctx, db, s.String(), s.args, append([]any{&fen}, dest...)...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return true, t.notFound(resource, "")
	case scanFailed(err):
		return true, fmt.Errorf("sqlfence: fenced read of %s: the row could not be read into dest: %w", resource, err)
	case err != nil:
		return true, fmt.Errorf("sqlfence: fenced read of %s: %w", resource, t.d.classify(err))
	case !fen.Valid:
		return true, fmt.Errorf("%w: %s has a NULL %s column; declare it NOT NULL DEFAULT 0", ErrSchema, resource, t.fenRaw)
	case fence.Token(fen.Int64) > token:
		return true, &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(fen.Int64)}
	}
	return fence.Token(fen.Int64) == token, nil
}

// readClaimed is the Store's, outside a transaction: it reads key's
// record, and reports whether it decided the claim: it did not when the
// key has no row or a floor below token, which the claim then raises. A
// read claims nothing: its failure is a definite one.
func (s *Store) readClaimed(ctx context.Context, key string, token fence.Token) (fence.Record, bool, error) {
	t := s.table
	q := (&stmt{d: t.d}).sql("SELECT ", s.value, ", ", t.fence, ", ", s.value, " IS NULL FROM ", t.name, " WHERE ", t.key, " = ").arg(key)
	var v []byte
	var cur int64
	var missing bool
	err := t.stmts.scan(ctx, s.db, q.String(), q.args, &v, &cur, &missing)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fence.Record{}, false, nil
	case err != nil:
		return fence.Record{}, true, fmt.Errorf("sqlfence: fenced read of %q: %w", key, t.d.classify(err))
	case fence.Token(cur) > token:
		return fence.Record{}, true, &fence.StaleError{Resource: key, Token: token, Current: fence.Token(cur)}
	case fence.Token(cur) < token:
		return fence.Record{}, false, nil
	}
	r, err := record(key, token, v, missing)
	return r, true, err
}
