package gormfence

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"gorm.io/gorm"
	gormcb "gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// stateKey is the Statement setting holding one fenced update's state,
// from the callback before gorm:update to the one after it.
const stateKey = "fencelock:gormfence:state"

// callbacks are the plugin's callbacks for one *gorm.DB's dialect. Set
// once by Initialize; safe for concurrent use.
type callbacks struct {
	d          sqlfence.Dialect
	sharedPool bool // Plugin.sharedPool
}

// state is what the callback after gorm:update needs of one fenced
// update. Set before the update by one goroutine's statement.
type state struct {
	token    fence.Token
	field    *schema.Field
	where    []clause.Expression // the update's own conditions, for the read back
	resource string
	landed   bool // the update landed; what is left is gorm's COMMIT, if it began a transaction
	// several: the conditions are not the model's primary key, and may
	// match several rows, some of which the fence refused.
	several bool
	// returning: the statement has a RETURNING clause the dialect builds,
	// so a landed update has read its row into the model.
	returning bool
	// conn: the connection of its own an update outside any transaction
	// runs on, on PostgreSQL (see dedicate); pool: the statement's pool
	// before it, given back with conn's release.
	conn *sql.Conn
	pool gorm.ConnPool
}

// returnedKey is the Statement setting by which a fenced update that
// landed says it read its row back (RETURNING), for [Claim].
const returnedKey = "fencelock:gormfence:returned"

// predicate is the fence's condition, column <= token: a type of its own,
// so that the read back can leave it out of the update's conditions.
type predicate struct {
	column string
	token  int64
}

// Build writes the predicate.
func (p predicate) Build(b clause.Builder) {
	b.WriteQuoted(clause.Column{Table: clause.CurrentTable, Name: p.column})
	b.WriteString(" <= ")
	b.AddVar(b, p.token)
}

// grouped is conditions in parentheses, however gorm would join them.
type grouped []clause.Expression

// Build writes the conditions in parentheses.
func (g grouped) Build(b clause.Builder) {
	b.WriteByte('(')
	clause.Where{Exprs: g}.Build(b)
	b.WriteByte(')')
}

// checkUpdate refuses, before gorm's default transaction begins (before
// any I/O), a fenced update of a model with no fence column, or one that
// names no row. beforeUpdate checks the conditions again once gorm has
// added the model's primary key to them.
func (c *callbacks) checkUpdate(db *gorm.DB) {
	if _, ok := markOf(db.Statement); !ok || db.Error != nil {
		return
	}
	if _, err := fenceField(db.Statement.Schema); err != nil {
		_ = db.AddError(err)
		return
	}
	if ctx := db.Statement.Context; ctx != nil && ctx.Err() != nil {
		// database/sql would refuse it unsent, which outside a
		// transaction would read as an unknown outcome.
		_ = db.AddError(fmt.Errorf("gormfence: the context ended before the fenced update of %s was sent; nothing was written: %w", db.Statement.Table, ctx.Err()))
		return
	}
	if !namesRow(db.Statement) {
		_ = db.AddError(noRow(db.Statement))
	}
}

// namesRow reports whether an update has conditions, or a model whose
// primary key gorm will add to them.
func namesRow(stmt *gorm.Statement) bool {
	if w, ok := stmt.Clauses["WHERE"].Expression.(clause.Where); ok && len(w.Exprs) > 0 {
		return true
	}
	return keyed(stmt)
}

// keyed reports whether an update's model has its primary key set, which
// gorm adds to the conditions: the update then names one row at most.
func keyed(stmt *gorm.Statement) bool {
	v := reflect.Indirect(reflect.ValueOf(stmt.Model))
	if v.Kind() != reflect.Struct || len(stmt.Schema.PrimaryFields) == 0 {
		return false
	}
	for _, f := range stmt.Schema.PrimaryFields {
		if _, zero := f.ValueOf(stmt.Context, v); zero {
			return false
		}
	}
	return true
}

func noRow(stmt *gorm.Statement) error {
	return fmt.Errorf("%w: a fenced update of %s names no row: set the model's primary key or add a Where (the fence predicate alone would update every row below the token)", ErrInvalidArgument, stmt.Schema.Table)
}

// beforeUpdate turns a fenced update's values into its SET clause with the
// fence column set to the token, and adds the fence predicate to its
// conditions, which must name a row already.
func (c *callbacks) beforeUpdate(db *gorm.DB) {
	tok, ok := markOf(db.Statement)
	if !ok || db.Error != nil {
		return
	}
	stmt := db.Statement
	stmt.Settings.Delete(stateKey)
	f, err := fenceField(stmt.Schema)
	if err != nil {
		_ = db.AddError(err)
		return
	}
	if stmt.SQL.Len() > 0 {
		_ = db.AddError(fmt.Errorf("%w: a fenced update is built by gorm, not written as SQL", ErrInvalidArgument))
		return
	}
	set := c.assignments(stmt, f, tok)
	where, _ := stmt.Clauses["WHERE"].Expression.(clause.Where)
	if len(where.Exprs) == 0 {
		_ = db.AddError(noRow(stmt))
		return
	}
	stmt.AddClause(set)
	// The caller's conditions in parentheses, then the predicate: gorm
	// joins an Or, and a raw OR it does not see, without them, and the
	// predicate would bind to the last condition only.
	wc := stmt.Clauses["WHERE"]
	exprs := append(c.tagged(stmt, tok), grouped(where.Exprs), predicate{column: f.DBName, token: int64(tok)})
	wc.Expression = clause.Where{Exprs: exprs}
	stmt.Clauses["WHERE"] = wc
	if c.d == sqlfence.MySQL && stmt.Result == nil {
		stmt.Result = gorm.WithResult()
	}
	_, returning := stmt.Clauses["RETURNING"]
	st := &state{token: tok, field: f, where: where.Exprs, several: !keyed(stmt),
		resource:  resource(stmt.Context, stmt.Schema, stmt.Table, stmt.ReflectValue),
		returning: returning && slices.Contains(stmt.BuildClauses, "RETURNING")}
	if err := c.dedicate(stmt, st); err != nil {
		_ = db.AddError(err)
		return
	}
	stmt.Settings.Store(stateKey, st)
}

// dedicate runs an update outside any transaction on PostgreSQL on a
// connection of its own, taken from the statement's *sql.DB. There, pgx's
// database/sql driver turns a lost answer into driver.ErrBadConn (pgx
// calls the closed connection safe to retry), and *sql.DB answers that by
// sending the statement again on another connection: an update applied
// twice (balance + 70 adding 140) and reported as nil. A *sql.Conn sends
// a statement once, and its ErrBadConn is then an unknown outcome
// (afterUpdate). Other pools (gorm's prepared statements) are left as
// they are: docs/gorm.md says to keep the default transaction there.
func (c *callbacks) dedicate(stmt *gorm.Statement, st *state) error {
	pool, ok := stmt.ConnPool.(*sql.DB)
	if c.d != sqlfence.PostgreSQL || !ok || stmt.DryRun || c.sharedPool {
		return nil
	}
	conn, err := pool.Conn(stmt.Context)
	if err != nil {
		return c.d.WriteError(false, "fenced update", st.resource, st.token, err)
	}
	st.conn, st.pool, stmt.ConnPool = conn, stmt.ConnPool, conn
	return nil
}

// assignments are the update's SET: what gorm would set (a SET clause of
// the caller's, else the values converted as gorm:update converts them),
// with the fence column's assignment replaced by the token.
func (c *callbacks) assignments(stmt *gorm.Statement, f *schema.Field, tok fence.Token) clause.Set {
	var set clause.Set
	if cl, ok := stmt.Clauses["SET"]; ok {
		set, _ = cl.Expression.(clause.Set)
	} else {
		set = gormcb.ConvertToAssignments(stmt)
	}
	out := make(clause.Set, 0, len(set)+1)
	for _, a := range set {
		if a.Column.Name != f.DBName {
			out = append(out, a)
		}
	}
	var v any = int64(tok)
	if c.d == sqlfence.MySQL {
		// Evaluated for every row the WHERE matches, changed or not: the
		// statement's insert id is then the token. MySQL counts rows
		// changed, so a rewrite of the same values counts none.
		v = clause.Expr{SQL: "LAST_INSERT_ID(?)", Vars: []any{int64(tok)}}
	}
	return append(out, clause.Assignment{Column: clause.Column{Name: f.DBName}, Value: v})
}

// afterUpdate decides a fenced update's outcome: landed (the model's fence
// field is set to the token), refused by a higher fence, no such row, or,
// when the statement failed, the failure as fence/sql classifies it.
func (c *callbacks) afterUpdate(db *gorm.DB) {
	v, ok := db.Statement.Settings.Load(stateKey)
	if !ok {
		return
	}
	st := v.(*state)
	stmt := db.Statement
	delete(stmt.Clauses, "SET") // as gorm:update does with the SET it builds
	if st.conn != nil {
		defer func() { stmt.ConnPool = st.pool; _ = st.conn.Close() }()
	}
	if db.Error != nil {
		if st.conn != nil && errors.Is(db.Error, driver.ErrBadConn) {
			// Sent once on its own connection, the statement may have
			// been applied: see dedicate.
			db.Error = &fence.UnknownOutcomeError{Resource: st.resource, Token: st.token, Err: db.Error}
			return
		}
		db.Error = c.d.WriteError(inTx(stmt.ConnPool), "fenced update", st.resource, st.token, db.Error)
		return
	}
	if stmt.DryRun {
		return
	}
	if c.landed(db, st.token) {
		if st.several {
			if err := c.refusedAny(db, st); err != nil {
				_ = db.AddError(err) // gorm's transaction, or the caller's, rolls back
				return
			}
		}
		st.landed = true
		if db.RowsAffected == 0 {
			// MySQL counted no row changed (the same values again): the
			// row matched, and Save must not go on to insert it.
			db.RowsAffected = 1
		}
		if st.returning {
			stmt.Settings.Store(returnedKey, true)
		}
		if rv := stmt.ReflectValue; rv.Kind() == reflect.Struct && rv.CanAddr() {
			_ = db.AddError(st.field.Set(stmt.Context, rv, int64(st.token)))
		}
		return
	}
	_ = db.AddError(c.readBack(db, st))
}

// afterCommit classifies the failure of the COMMIT of the transaction gorm
// began for a fenced update that landed in it (its default transaction):
// one whose answer was lost is an unknown outcome.
func (c *callbacks) afterCommit(db *gorm.DB) {
	v, ok := db.Statement.Settings.LoadAndDelete(stateKey)
	if !ok {
		return
	}
	st := v.(*state)
	if _, began := db.InstanceGet("gorm:started_transaction"); began && st.landed && db.Error != nil {
		db.Error = c.d.CommitError(st.resource, st.token, db.Error)
	}
}

// landed reports whether the update matched its row: in MySQL its insert
// id is the token (LAST_INSERT_ID(token) ran), elsewhere it counted rows.
func (c *callbacks) landed(db *gorm.DB, tok fence.Token) bool {
	if db.RowsAffected > 0 {
		return true
	}
	if c.d != sqlfence.MySQL || db.Statement.Result == nil || db.Statement.Result.Result == nil {
		return false
	}
	id, err := db.Statement.Result.Result.LastInsertId()
	return err == nil && id == int64(tok)
}

// readBack tells why a fenced update matched no row: a higher fence, or no
// row matching its conditions. In MySQL the read is a locking one, which
// reads the newest committed rows rather than a REPEATABLE READ snapshot.
func (c *callbacks) readBack(db *gorm.DB, st *state) error {
	stmt := db.Statement
	q := db.Session(&gorm.Session{NewDB: true, Context: stmt.Context}).Table(stmt.Table).
		Clauses(clause.Where{Exprs: st.where})
	if c.d == sqlfence.MySQL {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var fences []int64
	if err := q.Pluck(st.field.DBName, &fences).Error; err != nil {
		return fmt.Errorf("gormfence: the fenced update of %s changed no row, and reading it back failed: %w", st.resource, err)
	}
	var top int64
	for _, f := range fences {
		top = max(top, f)
	}
	switch {
	case top > int64(st.token):
		return &fence.StaleError{Resource: st.resource, Token: st.token, Current: fence.Token(top)}
	case len(fences) == 0:
		return fmt.Errorf("%w: %s", ErrRowNotFound, st.resource)
	}
	return fmt.Errorf("%w: %s: its row's fence %d is not above the token %d, yet the update matched no row (the model's soft delete, or a change in between)",
		ErrRowNotFound, st.resource, top, st.token)
}

// refusedAny tells whether an update that landed, and whose conditions may
// match several rows, left some of them for their higher fence: it
// landed on the others, and is stale all the same.
func (c *callbacks) refusedAny(db *gorm.DB, st *state) error {
	stmt := db.Statement
	q := db.Session(&gorm.Session{NewDB: true, Context: stmt.Context}).Table(stmt.Table).
		Clauses(clause.Where{Exprs: []clause.Expression{grouped(st.where),
			clause.Gt{Column: clause.Column{Name: st.field.DBName}, Value: int64(st.token)}}})
	var top *int64
	if err := q.Select("MAX(?)", clause.Column{Name: st.field.DBName}).Scan(&top).Error; err != nil {
		return fmt.Errorf("gormfence: the fenced update of %s landed, and reading whether it left rows at a higher fence failed: %w", st.resource, err)
	}
	if top != nil {
		return &fence.StaleError{Resource: st.resource, Token: st.token, Current: fence.Token(*top)}
	}
	return nil
}

// inTx reports whether pool is a transaction (*sql.Tx, or gorm's prepared
// statements' transaction).
func inTx(pool gorm.ConnPool) bool {
	_, ok := pool.(gorm.TxCommitter)
	return ok
}
