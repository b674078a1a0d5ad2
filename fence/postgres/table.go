package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
)

// Table is a user table whose rows are written with fencing: each row has a
// key column and a fence column holding the highest token written to it,
// and a write lands only if its token is not lower. [Table.GetForUpdate]
// reads a row the same way, raising its fence first, so that what a holder
// reads cannot be overwritten by an older holder afterwards.
//
// The fence column is the row's only floor: SQL that writes the row inside
// [Fences.RunInTx] or [Fences.Exec] does not raise it, unless the table has
// the trigger of [Table.CreateTrigger] (see "One floor per resource" in the
// package documentation).
//
// Create one with [NewTable]; the zero Table is not usable (its methods
// fail with [ErrInvalidArgument]). A Table holds no connection and is safe
// for concurrent use.
type Table struct {
	name   string // quoted
	label  string // unquoted, for errors
	key    string // quoted
	fence  string // quoted
	keyRaw string
	fenRaw string
	tel    *pgTelemetry
	// preemptAfter is how long a claim waits before it ends an older
	// token's transaction that blocks it; 0 never.
	preemptAfter time.Duration
	// xmaxSQL lists the xmax of the row whose key is $2 (preempt.go).
	xmaxSQL string
	// columnsOK is set once the key and fence columns were found, keyUnique
	// once the key column was also found to be unique.
	columnsOK, keyUnique atomic.Bool
}

// NewTable returns a fenced view of the table name (schema-qualified or
// not: pgx.Identifier{"accounts"}, pgx.Identifier{"billing", "accounts"}).
// It fails with [ErrInvalidIdentifier] on an unusable name, and with
// [ErrInvalidOption] on an invalid option, before any I/O; whether the table
// exists is found out at the first write ([ErrSchema]).
func NewTable(name pgx.Identifier, opts ...TableOption) (*Table, error) {
	qname, err := quoteName("table", name)
	if err != nil {
		return nil, err
	}
	o, err := newTableOptions(opts)
	if err != nil {
		return nil, err
	}
	tel, err := o.tel.telemetry()
	if err != nil {
		return nil, err
	}
	key := pgx.Identifier{o.key}.Sanitize()
	return &Table{name: qname, label: strings.Join(name, "."), keyRaw: o.key, fenRaw: o.fence,
		key: key, fence: pgx.Identifier{o.fence}.Sanitize(), tel: tel, preemptAfter: o.preemptAfter,
		xmaxSQL: "SELECT xmax::text FROM " + qname + " WHERE " + key + " = $2"}, nil
}

// Assignment sets one column in a fenced write. Create it with [Set] or
// [Add]; the zero Assignment names no column and is refused.
type Assignment struct {
	column string
	value  any
	add    bool // column = column + value
}

// Set returns an assignment of value, sent as a query parameter, to column.
func Set(column string, value any) Assignment { return Assignment{column: column, value: value} }

// Add returns an assignment that adds delta, sent as a query parameter, to
// column's value in the server, in the fenced statement itself:
//
//	UPDATE t SET "balance" = "balance" + $3, fence = $2 WHERE ...
//
// so a counter or a balance changes by delta with no read in the client,
// and two holders' additions both count. delta may be negative, and of any
// type the column's + takes (an int64 for a bigint, a time.Duration for an
// interval, ...). As in SQL, a NULL column stays NULL: declare it NOT NULL
// DEFAULT 0.
//
// In [Table.Upsert], a row that does not exist yet is created with the
// column set to delta, as if it had held zero, whatever the column's
// default; an existing row gets column + delta.
func Add(column string, delta any) Assignment {
	return Assignment{column: column, value: delta, add: true}
}

// Update sets the columns of the row whose key is key, and its fence column
// to token, in one statement that lands only if the row's fence is not
// higher than token:
//
//	UPDATE t SET c1 = $3, ..., fence = $2 WHERE key = $1 AND fence <= $2
//
// ("c1 = c1 + $3" for an [Add]). With no assignments it only raises the
// fence. To write what you computed from the row, read it with
// [Table.GetForUpdate] in the same transaction, not with a plain SELECT. The key column must be
// unique by itself, or one update could land on some rows with that key and
// be refused on others: the first Update of a Table checks the catalog and
// fails with [ErrSchema] when the key or fence column does not exist (the
// error says which, and for the fence column the ALTER TABLE that adds it),
// or when no unique index (or primary key) on the key column alone, not
// partial, is found. When no row changed it
// returns an error matching [fence.ErrStale] (a [*fence.StaleError] with the
// row's fence as Current) if the row's fence is higher, or [ErrRowNotFound]
// if there is no such row; either way nothing was written. When the outcome
// cannot be known it returns an error matching [fence.ErrUnknownOutcome].
//
// ctx bounds the call. If it ends while the statement is in flight, the
// statement is cancelled, but it may still have committed: the error then
// matches [fence.ErrUnknownOutcome]. db may be a pgx.Tx: the write then
// lands when that transaction commits, and a connection lost meanwhile is a
// definite failure (the transaction cannot commit any more), not an unknown
// outcome.
func (t *Table) Update(ctx context.Context, db DB, key any, token fence.Token, set ...Assignment) error {
	if err := cmp.Or(t.check(), checkCtx(ctx)); err != nil {
		return err
	}
	sql, args, err := t.prepare(ctx, db, key, token, set, t.updateSQL)
	if err != nil {
		return err
	}
	return t.tel.write(ctx, t.tel.Update, token, func() string { return t.resource(key) }, func(ctx context.Context) error {
		return t.update(ctx, db, key, token, sql, args)
	})
}

// update runs a prepared update; the row's resource name is formatted only
// for an error.
func (t *Table) update(ctx context.Context, db DB, key any, token fence.Token, sql string, args []any) error {
	return withConn(ctx, db, func(c DB) error {
		if err := t.checkUniqueKey(ctx, c); err != nil {
			return err
		}
		resource := t.resource(key)
		tag, err := watched(ctx, t.preemptAfter, db, c, resource, token, t.xmaxSQL, key, func() (pgconn.CommandTag, error) {
			sql, args := tagging(c, sql, false, resource, token, args)
			return c.Exec(ctx, sql, args...)
		})
		if err != nil {
			return writeError(c, "update", resource, token, err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		return t.refused(ctx, c, key, t.resource(key), token, true)
	})
}

// Upsert is [Table.Update] that creates the row when there is none, in one
// statement:
//
//	INSERT INTO t AS cur (key, c1, ..., fence) SELECT $1, $3, ..., $2
//	WHERE NOT EXISTS (SELECT FROM t WHERE key = $1 AND fence > $2)
//	ON CONFLICT (key) DO UPDATE SET c1 = EXCLUDED.c1, ..., fence = EXCLUDED.fence
//	WHERE cur.fence <= EXCLUDED.fence
//
// The NOT EXISTS keeps a refused upsert from inserting a candidate row, so
// that the table's BEFORE INSERT row triggers and column defaults do not run
// for it; see "What a refused write leaves" in the package documentation
// for the exceptions.
//
// The key column needs a unique constraint ([ErrSchema] otherwise), and the
// first Upsert of a Table checks, as Update does, that the key and fence
// columns exist. Columns
// not assigned take their defaults in a new row (see [Add] for an added
// one). Errors are those of
// [Table.Update], but for [ErrRowNotFound], which it never returns.
func (t *Table) Upsert(ctx context.Context, db DB, key any, token fence.Token, set ...Assignment) error {
	if err := cmp.Or(t.check(), checkCtx(ctx)); err != nil {
		return err
	}
	sql, args, err := t.prepare(ctx, db, key, token, set, t.upsertSQL)
	if err != nil {
		return err
	}
	resource := func() string { return t.resource(key) }
	return t.tel.write(ctx, t.tel.Upsert, token, resource, func(ctx context.Context) error {
		return t.upsert(ctx, db, key, token, resource, sql, args, true, nil)
	})
}

// upsert runs a prepared upsert of the row resource names, which is
// formatted only for an error, as in update, after checking the Table's
// columns if check is set. vet, when set, vets its preemption (see vetted).
func (t *Table) upsert(ctx context.Context, db DB, key any, token fence.Token, resource func() string, sql string, args []any,
	check bool, vet func(context.Context, *pgx.Conn) error) error {
	return withConn(ctx, db, func(c DB) error {
		if check {
			if err := t.checkColumns(ctx, c); err != nil {
				return err
			}
		}
		name := resource()
		tag, err := vetted(ctx, t.preemptAfter, vet, db, c, name, token, t.xmaxSQL, key, func() (pgconn.CommandTag, error) {
			sql, args := tagging(c, sql, false, name, token, args)
			return c.Exec(ctx, sql, args...)
		})
		if err != nil {
			return writeError(c, "upsert", name, token, err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		return t.refused(ctx, c, key, resource(), token, false)
	})
}

// refused tells why a fenced write changed no row. The write is already
// known not to have landed; the read only names the reason. For an update
// the row may be missing (missingOK); an upsert that changed nothing was
// refused by the fence.
func (t *Table) refused(ctx context.Context, db DB, key any, resource string, token fence.Token, missingOK bool) error {
	var cur *int64
	err := db.QueryRow(ctx, "SELECT "+t.fence+" FROM "+t.name+" WHERE "+t.key+" = $1", key).Scan(&cur)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && missingOK:
		return fmt.Errorf("%w: %s", ErrRowNotFound, resource)
	case err != nil && missingOK:
		return fmt.Errorf("postgres: update %s changed no row (stale token or no row), reading which failed: %w", resource, classify(err))
	case err == nil && cur == nil:
		return fmt.Errorf("%w: %s has a NULL %s column; declare it NOT NULL DEFAULT 0", ErrSchema, resource, t.fenRaw)
	case err == nil && fence.Token(*cur) > token:
		return &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(*cur)}
	case missingOK:
		// The row is there now with a fence we pass: it was created after
		// the update looked.
		return fmt.Errorf("%w: %s (a row appeared since)", ErrRowNotFound, resource)
	}
	return &fence.StaleError{Resource: resource, Token: token}
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

func (t *Table) resource(key any) string { return fmt.Sprintf("%s/%v", t.label, key) }
