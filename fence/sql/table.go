package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
)

// Table is a user table whose rows are written with fencing: each row has
// a key column and a fence column holding the highest token written to it,
// and a write lands only if its token is not lower.
//
// The fence column is the row's only floor: SQL that writes the row inside
// [Fences.RunInTx] does not raise it (see "One floor per resource" in the
// package documentation).
//
// Create one with [NewTable]; the zero Table is not usable. A Table holds
// no connection and is safe for concurrent use.
type Table struct {
	d       Dialect
	name    string // quoted
	base    string // the name's last part, quoted: what columns are qualified with
	label   string // unquoted, for errors
	alias   string // how the upsert names the existing row
	key     string // quoted
	fence   string // quoted
	keyRaw  string
	fenRaw  string
	retries int
	tel     *sqlTelemetry
	stmts   *prepared
	// signal is set for the Store's own table, which has no
	// AUTO_INCREMENT column: a refused MySQL upsert then reports the
	// row's fence as its insert id (LAST_INSERT_ID(fence)), so no read
	// back is needed.
	signal bool
}

// NewTable returns a fenced view of the table name in dialect d. It fails
// with [ErrInvalidIdentifier] on an unusable name, and with
// [ErrInvalidOption] on an invalid option or dialect, before any I/O;
// whether the table exists is found out at the first write ([ErrSchema]).
func NewTable(d Dialect, name Identifier, opts ...TableOption) (*Table, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	qname, err := quoteName(d, "table", name)
	if err != nil {
		return nil, err
	}
	o, err := newTableOptions(d, opts)
	if err != nil {
		return nil, err
	}
	key, _ := quoteIdent(d, "key column", o.key)
	fen, _ := quoteIdent(d, "fence column", o.fence)
	alias, _ := quoteIdent(d, "alias", "fencelock_cur")
	base, _ := quoteIdent(d, "table", name[len(name)-1])
	tel, err := o.telemetry()
	if err != nil {
		return nil, err
	}
	return &Table{d: d, name: qname, base: base, label: strings.Join(name, "."), alias: alias,
		key: key, fence: fen, keyRaw: o.key, fenRaw: o.fence, retries: o.retries, tel: tel, stmts: newPrepared(d, o.options)}, nil
}

// Update sets the columns of the row whose key is key, and its fence
// column to token, in one statement that lands only if the row's fence is
// not higher than token:
//
//	UPDATE t SET c1 = ?, c2 = c2 + ?, ..., fence = ? WHERE key = ? AND fence <= ?
//
// ([Set] assigns c1, [Add] adds to c2.) With no assignments it only
// raises the fence. When the statement reports no row (MySQL counts rows
// changed, so a rewrite of the same values with the same token counts
// none) the row is read back, with a locking read in
// MySQL so that a REPEATABLE READ snapshot cannot hide a newer fence: the
// call returns nil when the row holds exactly this write, an error
// matching [fence.ErrStale] (a [*fence.StaleError] with the row's fence as
// Current) when its fence is higher, and [ErrRowNotFound] when there is no
// such row; in the last two cases nothing was written. When the outcome
// cannot be known it returns an error matching [fence.ErrUnknownOutcome].
//
// A deadlock or busy lock ([ErrRetryable]) is retried ([WithRetries])
// unless db is a *sql.Tx. ctx bounds the call, retries included. db may be
// a *sql.Tx: the write then lands when that transaction commits, and every
// failure is a definite one.
func (t *Table) Update(ctx context.Context, db DB, key any, token fence.Token, set ...Assignment) error {
	cols, err := t.prepare(ctx, db, key, token, set)
	if err != nil {
		return err
	}
	s := &stmt{d: t.d}
	s.sql("UPDATE ", t.name, " SET ")
	for i, c := range cols {
		set[i].update(s, c)
		s.sql(", ")
	}
	s.sql(t.fence, " = ").arg(int64(token)).sql(" WHERE ", t.key, " = ").arg(key).sql(" AND ", t.fence, " <= ").arg(int64(token))
	return t.run(ctx, db, t.tel.Update, key, token, func(ctx context.Context, c DB) error {
		res, err := t.stmts.exec(ctx, nil, c, s.String(), s.args...)
		if err != nil {
			return t.d.writeError(c, "update", t.resource(key), token, err)
		}
		if n, err := res.RowsAffected(); err == nil && n >= 1 {
			return nil // the key column is unique: n is 1
		}
		return t.readBack(ctx, c, key, token, cols, set, true)
	})
}

// Upsert is [Table.Update] that creates the row when there is none, in
// one statement. PostgreSQL and SQLite:
//
//	INSERT INTO t AS cur (key, c1, ..., fence) SELECT ?, ?, ..., ?
//	WHERE NOT EXISTS (SELECT 1 FROM t WHERE key = ? AND fence > ?)
//	ON CONFLICT (key) DO UPDATE SET c1 = excluded.c1, ..., fence = excluded.fence
//	WHERE cur.fence <= excluded.fence
//
// MySQL and MariaDB:
//
//	INSERT INTO t (key, c1, ..., fence) VALUES (?, ?, ..., ?)
//	ON DUPLICATE KEY UPDATE c1 = IF(fence <= VALUES(fence), VALUES(c1), c1), ...,
//	fence = IF(fence <= VALUES(fence), VALUES(fence), fence)
//
// MySQL's count for it is 1 for an insert, 2 for an update, and 0 (1 with
// clientFoundRows) for a row left as it was, refused or rewritten with the
// same values: anything but 2 is read back as for Update. (The [Store]'s
// table, which has no AUTO_INCREMENT column, has the refusal set the
// insert id to the row's fence instead: fence = IF(..., VALUES(fence),
// LAST_INSERT_ID(fence)).) In MySQL, ON
// DUPLICATE KEY fires on any unique index: a Table written with Upsert
// must have no unique index but the key column's that a new row could
// collide on.
//
// The key column needs a unique constraint ([ErrSchema] otherwise in
// PostgreSQL and SQLite). Columns not assigned take their defaults in a
// new row; an [Add] column gets its delta in a new row, and adds it to
// the existing row's value (cur.c2 + excluded.c2; in MySQL
// c2 + VALUES(c2)). Errors are those of [Table.Update], but for
// [ErrRowNotFound], which it never returns.
func (t *Table) Upsert(ctx context.Context, db DB, key any, token fence.Token, set ...Assignment) error {
	if err := t.check(); err != nil {
		return err
	}
	return t.upsert(ctx, db, t.tel.Upsert, key, token, set)
}

// check refuses a nil or zero Table, which would otherwise panic.
func (t *Table) check() error {
	if t == nil || t.stmts == nil {
		return fmt.Errorf("%w: a nil or zero Table; create one with NewTable", ErrInvalidArgument)
	}
	return nil
}

// upsert is [Table.Upsert], reported as op.
func (t *Table) upsert(ctx context.Context, db DB, op *tel.Op, key any, token fence.Token, set []Assignment) error {
	cols, err := t.prepare(ctx, db, key, token, set)
	if err != nil {
		return err
	}
	s := t.upsertStmt(key, token, cols, set)
	return t.run(ctx, db, op, key, token, func(ctx context.Context, c DB) error {
		res, err := t.stmts.exec(ctx, nil, c, s.String(), s.args...)
		if err != nil {
			return t.d.upsertError(ctx, c, t.resource(key), token, err)
		}
		if t.signal && t.d == MySQL {
			return signalled(res, t.resource(key), token)
		}
		n, err := res.RowsAffected()
		switch {
		case err != nil:
		case t.d == MySQL && n == 2, t.d != MySQL && n == 1:
			return nil
		}
		return t.readBack(ctx, c, key, token, cols, set, false)
	})
}

// run runs write on db, retried on [ErrRetryable] unless db is the
// caller's transaction, as one write of op with token in the telemetry.
// On a *sql.DB each try takes any connection of the pool (on PostgreSQL
// one of its own, sendOnce), and its read back the same.
func (t *Table) run(ctx context.Context, db DB, op *tel.Op, key any, token fence.Token, write func(context.Context, DB) error) error {
	return t.tel.write(ctx, op, token, func() string { return t.resource(key) }, func(ctx context.Context) error {
		if inTx(db) {
			return once(ctx, t.d, t.tel, func() error { return write(ctx, db) })
		}
		return retry(ctx, t.d, t.retries, t.tel, func() error {
			return sendOnce(ctx, t.d, db, func(c DB) error { return write(ctx, c) })
		})
	})
}

// readBack tells why a fenced write counted no row: the row holds exactly
// this write (MySQL counts rows changed), its fence is higher, or there is
// no row. The write is already known not to have changed anything; the
// read only names the outcome.
func (t *Table) readBack(ctx context.Context, db DB, key any, token fence.Token, cols []string, set []Assignment, update bool) error {
	s := &stmt{d: t.d}
	s.sql("SELECT ", t.fence)
	if t.d == MySQL {
		// Whether the row holds this write (Assignment.holds).
		s.sql(", 1")
		for i, c := range cols {
			set[i].holds(s, c, !update)
		}
	}
	s.sql(" FROM ", t.name, " WHERE ", t.key, " = ").arg(key)
	if t.d == MySQL {
		// A locking read reads the newest committed row, not the
		// transaction's REPEATABLE READ snapshot.
		s.sql(" FOR UPDATE")
	}
	var cur sql.NullInt64
	var same sql.NullBool
	dest := []any{&cur}
	if t.d == MySQL {
		dest = append(dest, &same)
	}
	resource := t.resource(key)
	err := db.QueryRowContext(ctx, s.String(), s.args...).Scan(dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows) && update:
		return fmt.Errorf("%w: %s", ErrRowNotFound, resource)
	case err != nil:
		return fmt.Errorf("sqlfence: %s changed no row, and reading it back failed: %w", resource, t.d.classify(err))
	case !cur.Valid:
		return fmt.Errorf("%w: %s has a NULL %s column; declare it NOT NULL DEFAULT 0", ErrSchema, resource, t.fenRaw)
	case fence.Token(cur.Int64) > token:
		return &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(cur.Int64)}
	case t.d == MySQL && fence.Token(cur.Int64) == token && same.Valid && same.Bool:
		return nil // the row holds this write: MySQL counted it unchanged
	case t.d == MySQL && fence.Token(cur.Int64) == token:
		return fmt.Errorf("sqlfence: %s changed no row, and now holds this token with other values (another write with the same token came between)", resource)
	case update:
		return fmt.Errorf("%w: %s (a row appeared since)", ErrRowNotFound, resource)
	}
	return fmt.Errorf("sqlfence: upsert of %s changed no row, and the row's fence %d is not above the token %d", resource, cur.Int64, token)
}

func (t *Table) upsertStmt(key any, token fence.Token, cols []string, set []Assignment) *stmt {
	s := &stmt{d: t.d}
	if t.d == MySQL {
		s.sql("INSERT INTO ", t.name, " (", t.key)
		for _, c := range cols {
			s.sql(", ", c)
		}
		s.sql(", ", t.fence, ") VALUES (").arg(key)
		for _, a := range set {
			s.sql(", ").arg(a.value)
		}
		s.sql(", ").arg(int64(token)).sql(") ON DUPLICATE KEY UPDATE ")
		// The fence is assigned last: MySQL evaluates the assignments in
		// order, each seeing the ones before it.
		ok := t.fence + " <= VALUES(" + t.fence + ")"
		for i, c := range cols {
			set[i].onDuplicate(s, c, ok)
			s.sql(", ")
		}
		if t.signal {
			s.sql(t.fence, " = IF(", ok, ", VALUES(", t.fence, "), LAST_INSERT_ID(", t.fence, "))")
			return s
		}
		s.sql(t.fence, " = IF(", ok, ", VALUES(", t.fence, "), ", t.fence, ")")
		return s
	}
	s.sql("INSERT INTO ", t.name, " AS ", t.alias, " (", t.key)
	for _, c := range cols {
		s.sql(", ", c)
	}
	s.sql(", ", t.fence, ") SELECT ").arg(key)
	for _, a := range set {
		s.sql(", ").arg(a.value)
	}
	s.sql(", ").arg(int64(token))
	s.sql(" WHERE NOT EXISTS (SELECT 1 FROM ", t.name, " WHERE ", t.key, " = ").arg(key).sql(" AND ", t.fence, " > ").arg(int64(token)).sql(")")
	s.sql(" ON CONFLICT (", t.key, ") DO UPDATE SET ")
	for i, c := range cols {
		set[i].onConflict(s, c, t.alias)
		s.sql(", ")
	}
	s.sql(t.fence, " = excluded.", t.fence, " WHERE ", t.alias, ".", t.fence, " <= excluded.", t.fence)
	return s
}

// prepare checks a fenced row write's arguments, before any I/O, and
// returns the assigned columns, quoted.
func (t *Table) prepare(ctx context.Context, db DB, key any, token fence.Token, set []Assignment) ([]string, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := checkWrite(ctx, db, key, token); err != nil {
		return nil, err
	}
	cols := make([]string, len(set))
	seen := make(map[string]bool, len(set))
	for i, a := range set {
		q, err := quoteIdent(t.d, "column", a.column)
		if err != nil {
			return nil, err
		}
		switch {
		case a.column == t.keyRaw || a.column == t.fenRaw:
			return nil, fmt.Errorf("%w: column %q is the table's key or fence column", ErrInvalidArgument, a.column)
		case a.add && nilcheck.IsNil(a.value):
			return nil, fmt.Errorf("%w: Add(%q, nil): no amount to add (it would set the column to NULL)", ErrInvalidArgument, a.column)
		case a.add && !isAmount(a.value):
			return nil, fmt.Errorf("%w: Add(%q, %T): the amount must be a number (MySQL, SQLite and PostgreSQL read a %T differently)", ErrInvalidArgument, a.column, a.value, a.value)
		case seen[a.column]:
			return nil, fmt.Errorf("%w: column %q assigned twice", ErrInvalidArgument, a.column)
		}
		seen[a.column] = true
		cols[i] = q
	}
	return cols, nil
}

// checkWrite checks what every fenced write needs, in the order the fence
// package's conformance suite expects: arguments, then the context.
func checkWrite(ctx context.Context, db DB, key any, token fence.Token) error {
	if err := checkDB(db); err != nil {
		return err
	}
	if s, ok := key.(string); key == nil || ok && s == "" {
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if err := token.Validate(); err != nil {
		return err
	}
	return checkCtx(ctx)
}

func (t *Table) resource(key any) string { return fmt.Sprintf("%s/%v", t.label, key) }

// signalled reads the outcome of a MySQL upsert whose refusal sets the
// insert id to the row's fence (LAST_INSERT_ID(fence)) on a table with no
// AUTO_INCREMENT column, where an insert or an accepted update reports 0:
// whatever the affected-rows count (0, 1 or 2, with or without
// clientFoundRows), an insert id above 0 is a refusal by that fence.
func signalled(res sql.Result, resource string, token fence.Token) error {
	id, err := res.LastInsertId()
	switch {
	case err != nil:
		return fmt.Errorf("sqlfence: upsert of %s: reading its insert id: %w", resource, err)
	case id > 0:
		return &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(id)}
	}
	return nil
}
