package sqlfence

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate returns the record under key after raising the key's floor
// to token in the same atomic step, with the record's Token set to token;
// see [fence.Updater] for the contract. A key with no value (never
// written, or deleted) is claimed too, with a floor-only row like
// [Store.Delete]'s tombstone, and the error matches [fence.ErrNotFound]; a
// higher floor refuses it with a [*fence.StaleError] and changes nothing.
// PostgreSQL and SQLite (3.35.0 or later) run one statement, the upsert
// of [Store.Put] with the token alone, RETURNING the value; MySQL and
// MariaDB that upsert, then a locking read (SELECT ... FOR UPDATE, which
// sees the newest row). A key whose floor is token already (the holder
// claimed it before) is only read, with no write, outside a transaction,
// as [Table.GetForUpdate] reads a row claimed already; the first claim is
// that read, then the claim. In a transaction the claim is the upsert
// every time (in MySQL a locking read of a new key would lock the gap
// around it, and deadlock transactions claiming other new keys). Retries and unknown outcomes are as for Put; a read claims
// nothing, and its failure is a definite one. ctx bounds the call,
// retries included.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.check(); err != nil {
		return fence.Record{}, err
	}
	if err := fence.CheckRead(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	return s.claim(ctx, key, token)
}

// Update claims key for token as [Store.GetForUpdate] does, passes its
// record to fn (the zero Record when the key has no value), and writes
// fn's result with token only if the row still holds what was read
// (UPDATE ... WHERE key = ? AND token = ? AND value = ?, or value IS NULL):
// a late write of an older holder was refused by the claim, and a write
// with the same token in between makes it read again, up to
// [fence.UpdateAttempts] times, then fail with [fence.ErrConflict]. A
// newer holder refuses it with [fence.ErrStale], before fn when it came
// first. fn runs between two statements, with no row locked and no
// transaction open, so that it may take its time (and even write the
// store itself, as the conformance suite's late writer does): a row lock
// held across it would make such a writer wait for fn, which waits for
// it. fn's error is returned as it is and a panic in fn is passed on;
// either way nothing is written but the claim, which stays (as in every
// store: the floor only goes up). A nil result is stored as an empty
// value. A write whose reply was lost matches [fence.ErrUnknownOutcome].
// ctx bounds the call.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.check(); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}

// rounds is a Store's [fence.UpdateRounds]: its Update is fence's loop
// over the claim and writeIf, each retried as [Store.run] retries.
type rounds Store

// read is what a claim read, which writeIf compares: the value, or none.
type read struct {
	value   []byte
	missing bool
}

// ClaimRead is the claim.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, read, error) {
	old, err := (*Store)(r).claim(ctx, key, token)
	// The write's condition is a copy: fn may compute its value in
	// old.Value's own bytes.
	return old, read{value: bytes.Clone(old.Value), missing: errors.Is(err, fence.ErrNotFound)}, err
}

// WriteIf is writeIf: v lands only if the row still holds token and the
// value read.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, old read, v []byte) error {
	s := (*Store)(r)
	if v == nil {
		v = []byte{}
	}
	var done bool
	err := s.run(ctx, func(s *Store) (err error) {
		done, err = s.writeIf(ctx, key, token, old.value, old.missing, v)
		return err
	})
	if !done && err == nil {
		return fence.ErrChanged
	}
	return err
}

// run runs attempt, retried on [ErrRetryable] unless the store's handle is
// a transaction. attempt gets the Store to use: s, or, on PostgreSQL with
// a *sql.DB, a copy of s on a connection of the pool's own, which sends
// each statement once (sendOnce).
func (s *Store) run(ctx context.Context, attempt func(*Store) error) error {
	t := s.table
	if inTx(s.db) {
		return once(ctx, t.d, t.tel, func() error { return attempt(s) })
	}
	return retry(ctx, t.d, t.retries, t.tel, func() error {
		return sendOnce(ctx, t.d, s.db, func(db DB) error {
			if db == s.db {
				return attempt(s)
			}
			c := *s
			c.db = db
			return attempt(&c)
		})
	})
}

// claim is GetForUpdate after its checks. A key whose floor is token
// already is only read outside a transaction (see read_claimed.go). In a
// MySQL transaction the claim stays the upsert: a locking read of a key
// with no row yet would take a gap lock, and two transactions' first
// claims of new keys would deadlock on each other's gaps.
func (s *Store) claim(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	var r fence.Record
	err := s.run(ctx, func(s *Store) (err error) {
		if !inTx(s.db) {
			var done bool
			if r, done, err = s.readClaimed(ctx, key, token); done {
				return err
			}
		}
		if s.table.d == MySQL {
			r, err = s.claimMySQL(ctx, key, token)
		} else {
			r, err = s.claimReturning(ctx, key, token)
		}
		return err
	})
	return r, err
}

// claimReturning is one try of claim in PostgreSQL and SQLite.
func (s *Store) claimReturning(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	t := s.table
	q := (&stmt{d: t.d}).sql("INSERT INTO ", t.name, " AS ", t.alias, " (", t.key, ", ", t.fence, ") SELECT ").arg(key).sql(", ").arg(int64(token)).
		sql(" WHERE NOT EXISTS (SELECT 1 FROM ", t.name, " WHERE ", t.key, " = ").arg(key).sql(" AND ", t.fence, " > ").arg(int64(token)).
		sql(") ON CONFLICT (", t.key, ") DO UPDATE SET ", t.fence, " = excluded.", t.fence, " WHERE ", t.alias, ".", t.fence, " <= excluded.", t.fence).
		sql(" RETURNING ", s.value, ", ", s.value, " IS NULL")
	var v []byte
	var missing bool
	err := s.db.QueryRowContext(ctx, q.String(), q.args...).Scan(&v, &missing)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fence.Record{}, s.refused(ctx, key, token)
	case err != nil:
		return fence.Record{}, t.d.readError(ctx, s.db, key, token, err)
	}
	return record(key, token, v, missing)
}

// claimMySQL is one try of claim in MySQL: the upsert of Put with the
// token alone (its refusal sets the insert id to the floor), which locks
// the row, then a locking read of it.
func (s *Store) claimMySQL(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	t := s.table
	q := (&stmt{d: t.d}).sql("INSERT INTO ", t.name, " (", t.key, ", ", t.fence, ") VALUES (").arg(key).sql(", ").arg(int64(token)).
		sql(") ON DUPLICATE KEY UPDATE ", t.fence, " = IF(", t.fence, " <= VALUES(", t.fence, "), VALUES(", t.fence, "), LAST_INSERT_ID(", t.fence, "))")
	res, err := t.stmts.exec(ctx, nil, s.db, q.String(), q.args...)
	if err != nil {
		return fence.Record{}, t.d.writeError(s.db, "fenced read", key, token, err)
	}
	if err := signalled(res, key, token); err != nil {
		return fence.Record{}, err
	}
	sel := (&stmt{d: t.d}).sql("SELECT ", s.value, ", ", t.fence, ", ", s.value, " IS NULL FROM ", t.name, " WHERE ", t.key, " = ").arg(key).sql(" FOR UPDATE")
	var v []byte
	var cur int64
	var missing bool
	err = t.stmts.scan(ctx, s.db, sel.String(), sel.args, &v, &cur, &missing)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fence.Record{}, fmt.Errorf("%w: %q (its row was deleted after the claim)", fence.ErrNotFound, key)
	case err != nil:
		return fence.Record{}, fmt.Errorf("sqlfence: fenced read of %q, its floor raised: %w", key, t.d.classify(err))
	case fence.Token(cur) > token: // outside a transaction, a newer holder came between
		return fence.Record{}, &fence.StaleError{Resource: key, Token: token, Current: fence.Token(cur)}
	case fence.Token(cur) < token:
		// Outside a transaction, the row was deleted (by other means than
		// the Store) and recreated by an older holder between the two
		// statements: the claim is gone, so it is not reported as made.
		return fence.Record{}, fmt.Errorf("%w: %q (its row was deleted and written again with token %d after the claim; claim again)", fence.ErrNotFound, key, cur)
	}
	return record(key, token, v, missing)
}

// record is the result of a claim that found v (missing: NULL).
func record(key string, token fence.Token, v []byte, missing bool) (fence.Record, error) {
	if missing {
		return fence.Record{}, fmt.Errorf("%w: %q (claimed with token %d)", fence.ErrNotFound, key, token)
	}
	if v == nil {
		v = []byte{}
	}
	return fence.Record{Value: v, Token: token}, nil
}

// writeIf writes v under key with token if the row still holds token and
// old (no value when missing). It reports false when the row changed (a
// same-token write came between: read again), and a [*fence.StaleError]
// when a higher token is there now.
func (s *Store) writeIf(ctx context.Context, key string, token fence.Token, old []byte, missing bool, v []byte) (bool, error) {
	t := s.table
	q := s.writeIfStmt(key, token, old, missing, v)
	res, err := t.stmts.exec(ctx, nil, s.db, q.String(), q.args...)
	if err != nil {
		return false, t.d.writeError(s.db, "update", key, token, err)
	}
	if ok, err := s.matched(res, token); ok || err != nil {
		return ok, err
	}
	cur, err := s.floor(ctx, key)
	switch {
	case err != nil:
		return false, fmt.Errorf("sqlfence: update of %q changed no row, and reading its floor failed: %w", key, t.d.classify(err))
	case cur > token:
		return false, &fence.StaleError{Resource: key, Token: token, Current: cur}
	}
	return false, nil
}

// writeIfStmt is writeIf's UPDATE ... WHERE key = ? AND token = ? AND
// value = ? (or value IS NULL). In MySQL, which counts rows changed, the
// token is set through LAST_INSERT_ID, so that the insert id says whether
// the row matched.
func (s *Store) writeIfStmt(key string, token fence.Token, old []byte, missing bool, v []byte) *stmt {
	t := s.table
	q := (&stmt{d: t.d}).sql("UPDATE ", t.name, " SET ", s.value, " = ").arg(v).sql(", ", t.fence, " = ")
	if t.d == MySQL {
		q.sql("LAST_INSERT_ID(").arg(int64(token)).sql(")")
	} else {
		q.arg(int64(token))
	}
	q.sql(" WHERE ", t.key, " = ").arg(key).sql(" AND ", t.fence, " = ").arg(int64(token))
	if missing {
		return q.sql(" AND ", s.value, " IS NULL")
	}
	return q.sql(" AND ", s.value, " = ").arg(old)
}

// matched reports whether writeIf's UPDATE matched its row.
func (s *Store) matched(res sql.Result, token fence.Token) (bool, error) {
	if s.table.d == MySQL {
		id, err := res.LastInsertId()
		return err == nil && id == int64(token), err
	}
	n, err := res.RowsAffected()
	return err == nil && n == 1, err
}

// floor reads key's floor (0 when there is no row). MySQL's read is a
// locking one: the newest row, not a REPEATABLE READ snapshot.
func (s *Store) floor(ctx context.Context, key string) (fence.Token, error) {
	t := s.table
	q := (&stmt{d: t.d}).sql("SELECT ", t.fence, " FROM ", t.name, " WHERE ", t.key, " = ").arg(key)
	if t.d == MySQL {
		q.sql(" FOR UPDATE")
	}
	var cur int64
	err := s.db.QueryRowContext(ctx, q.String(), q.args...).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return fence.Token(cur), err
}

// refused is the error of a claim the floor refused: a
// [*fence.StaleError], with the floor when it can be read.
func (s *Store) refused(ctx context.Context, key string, token fence.Token) error {
	se := &fence.StaleError{Resource: key, Token: token}
	if cur, err := s.floor(ctx, key); err == nil && cur > token {
		se.Current = cur
	}
	return se
}
