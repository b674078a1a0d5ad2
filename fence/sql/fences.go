package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/pgtag"
)

// DefaultFenceTable is the fence table [CreateSchema] creates.
const DefaultFenceTable = "fencelock_fences"

// Fences is a fence table: one row per resource (a lock name, an invoice,
// a tenant) holding the highest token any fenced transaction on it
// carried. A fenced transaction first raises its resource's row to its
// token, and is rolled back with [fence.ErrStale] if the row is already
// higher. The row lock this takes serialises fenced transactions on one
// resource until they end, so a stale one can never commit after a newer
// one. (SQLite has one writer at a time anyway: a fenced transaction holds
// the database's write lock from its first statement to its end.)
//
// The table is (resource PRIMARY KEY, token BIGINT NOT NULL); see
// [Fences.CreateTable]. Create a Fences with [NewFences]; the zero Fences
// is not usable. A Fences holds no connection and is safe for concurrent
// use.
type Fences struct {
	d         Dialect
	name      string
	qualified bool // name has a schema
	label     string
	alias     string
	retries   int
	tel       *sqlTelemetry
	stmts     *prepared
}

// NewFences returns the [Fences] kept in the table called name, in dialect
// d. It fails with [ErrInvalidIdentifier] on an unusable name, and with
// [ErrInvalidOption] on an invalid option or dialect, before any I/O.
func NewFences(d Dialect, name Identifier, opts ...Option) (*Fences, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	q, err := quoteName(d, "fence table", name)
	if err != nil {
		return nil, err
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	alias, _ := quoteIdent(d, "alias", "fencelock_cur")
	tel, err := o.telemetry()
	if err != nil {
		return nil, err
	}
	return &Fences{d: d, name: q, qualified: len(name) > 1, label: strings.Join(name, "."), alias: alias, retries: o.retries, tel: tel, stmts: newPrepared(d, o)}, nil
}

// CreateTable creates the fence table if it does not exist. ctx bounds the
// call.
func (f *Fences) CreateTable(ctx context.Context, db DB) error {
	if err := f.check(); err != nil {
		return err
	}
	if err := checkDB(db); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + f.name + " (" + f.d.keyColumnDDL("resource") + ", token BIGINT NOT NULL CHECK (token > 0))" + f.d.tableSuffix()
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("sqlfence: create fence table %s: %w", f.label, f.d.classify(err))
	}
	return nil
}

// Advance raises resource's fence to token, or returns a
// [*fence.StaleError] (Current filled) when it is already higher. Run it
// first in a transaction you manage yourself, as [Fences.RunInTx] does;
// roll the transaction back when it fails. ctx bounds the call.
//
// Outside a transaction the statement commits by itself, and a lost
// connection or a ctx that ended mid-request gives an error matching
// [fence.ErrUnknownOutcome].
func (f *Fences) Advance(ctx context.Context, db DB, resource string, token fence.Token) error {
	if err := f.check(); err != nil {
		return err
	}
	if err := checkWrite(ctx, db, resource, token); err != nil {
		return err
	}
	// On a pool, a wait on an older token's frozen transaction ends it as
	// RunInTx's does (preempt.go); in the caller's transaction there is no
	// other connection to look from.
	pool, _ := db.(*sql.DB)
	p := preemption{f: f, pool: pool, after: defaultPreemptAfter, claim: fence.Claim{Resource: resource, Token: token}}
	advance := func() error { return p.guard(ctx, func() error { return f.advance(ctx, nil, db, resource, token) }) }
	if inTx(db) {
		return once(ctx, f.d, f.tel, advance)
	}
	return retry(ctx, f.d, f.retries, f.tel, advance)
}

// advance raises the fence with an UPDATE of the resource's row, the
// usual case and the cheapest statement, and only when that finds no row
// it may raise (none, or one above the token) with an upsert. pool, when
// not nil, is the pool db is a transaction of.
func (f *Fences) advance(ctx context.Context, pool *sql.DB, db DB, resource string, token fence.Token) error {
	s := f.advanceStmt(resource, token)
	res, err := f.stmts.exec(ctx, pool, db, s.String(), s.args...)
	if err != nil {
		return f.d.writeError(db, "advance fence", resource, token, err)
	}
	if f.d == MySQL {
		id, err := res.LastInsertId()
		switch {
		case err != nil:
			return fmt.Errorf("sqlfence: advance fence %s: reading its insert id: %w", resource, err)
		case id == int64(token):
			return nil
		case id > int64(token):
			return &fence.StaleError{Resource: resource, Token: token, Current: fence.Token(id)}
		}
	} else if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	return f.upsert(ctx, db, resource, token)
}

// check refuses a nil or zero Fences, which would otherwise panic.
func (f *Fences) check() error {
	if f == nil || f.stmts == nil {
		return fmt.Errorf("%w: a nil or zero Fences; create one with NewFences", ErrInvalidArgument)
	}
	return nil
}

// advanceStmt is advance's UPDATE; its text is the same for every resource
// and token.
func (f *Fences) advanceStmt(resource string, token fence.Token) *stmt {
	s := &stmt{d: f.d}
	if f.d == MySQL {
		// MySQL counts rows changed, and a rewrite of the same token
		// changes none: the insert id says what happened instead, the
		// token when raised, the higher fence when refused, 0 for no row.
		s.sql("UPDATE ", f.name, " SET token = IF(token <= ").arg(int64(token)).sql(", LAST_INSERT_ID(").arg(int64(token)).
			sql("), LAST_INSERT_ID(token)) WHERE resource = ").arg(resource)
		return s
	}
	if f.d == PostgreSQL {
		// Shows the token to a newer holder this transaction may block
		// (preempt.go), before the row is locked: the subquery is joined
		// before the row it updates is taken.
		s.sql("UPDATE ", f.name, " SET token = ").arg(int64(token)).sql(" FROM (SELECT ",
			pgtag.SQL("$1::bigint", "$1::bigint", pgtag.EntrySQL("$2::text", "$1")),
			") AS fencelock_tag WHERE resource = ").arg(resource).sql(" AND token <= ").arg(int64(token))
		return s
	}
	s.sql("UPDATE ", f.name, " SET token = ").arg(int64(token)).sql(" WHERE resource = ").arg(resource).sql(" AND token <= ").arg(int64(token))
	return s
}

// upsert raises the fence when the UPDATE of advance found no row to
// raise: it inserts the row, or finds it refused (or created meanwhile).
func (f *Fences) upsert(ctx context.Context, db DB, resource string, token fence.Token) error {
	s := &stmt{d: f.d}
	if f.d == MySQL {
		s.sql("INSERT INTO ", f.name, " (resource, token) VALUES (").arg(resource).sql(", ").arg(int64(token)).
			sql(") ON DUPLICATE KEY UPDATE token = IF(token <= VALUES(token), VALUES(token), LAST_INSERT_ID(token))")
	} else {
		s.sql("INSERT INTO ", f.name, " AS ", f.alias, " (resource, token) VALUES (").arg(resource).sql(", ")
		if f.d == PostgreSQL {
			// The tag is set as the row to insert is made, before any wait
			// for the resource's row (preempt.go).
			s.sql("CASE WHEN ", pgtag.SQL("$2::bigint", "$2::bigint", pgtag.EntrySQL("$1::text", "$2")), " IS NOT NULL THEN ").
				arg(int64(token)).sql("::bigint END")
		} else {
			s.arg(int64(token))
		}
		s.sql(") ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE ", f.alias, ".token <= excluded.token")
	}
	res, err := db.ExecContext(ctx, s.String(), s.args...)
	if err != nil {
		return f.d.upsertError(ctx, db, resource, token, err)
	}
	if f.d == MySQL {
		// The refusal sets the insert id to the fence.
		return signalled(res, resource, token)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	se := &fence.StaleError{Resource: resource, Token: token}
	if cur, err := f.current(ctx, db, resource); err == nil && cur > token {
		se.Current = cur
	}
	return se
}

// Current returns the highest token accepted for resource, or an error
// matching [fence.ErrNotFound] if none was. ctx bounds the call.
func (f *Fences) Current(ctx context.Context, db DB, resource string) (fence.Token, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if err := checkDB(db); err != nil {
		return 0, err
	}
	if resource == "" {
		return 0, fmt.Errorf("%w: empty resource", fence.ErrInvalidKey)
	}
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	return f.current(ctx, db, resource)
}

func (f *Fences) current(ctx context.Context, db DB, resource string) (fence.Token, error) {
	s := (&stmt{d: f.d}).sql("SELECT token FROM ", f.name, " WHERE resource = ").arg(resource)
	var tok int64
	err := db.QueryRowContext(ctx, s.String(), s.args...).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: no fence for %q in %s", fence.ErrNotFound, resource, f.label)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlfence: read fence %s: %w", resource, f.d.classify(err))
	}
	return fence.Token(tok), nil
}
