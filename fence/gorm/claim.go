package gormfence

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Claim is the first touch of a row by a holder: it raises the row's fence
// to token, then reads the row into model, whose primary key names it:
//
//	UPDATE accounts SET fence = ? WHERE id = ? AND fence <= ? RETURNING *
//
// (in MySQL and MariaDB, which have no RETURNING, the UPDATE and then
// SELECT * FROM accounts WHERE id = ? FOR UPDATE; the same on a dialector
// that builds no RETURNING).
//
// Once it returns nil, no write with an older token lands on the row, so
// what the holder computes from model cannot be overwritten by an older
// holder's late write, nor overwrite a newer one's (a plain read claims
// nothing; see "Reading before you write" in fence/sql's documentation).
// In a transaction (db from db.Transaction or db.Begin) the row then stays
// locked until it ends, and an older holder's uncommitted write to it is
// waited for and read.
//
// A higher fence refuses the claim with an error matching [fence.ErrStale]
// and changes nothing; no such row is [ErrRowNotFound]. Outside a
// transaction, where the claim is two statements a newer holder's claim
// may come between them: the read then finds its fence and the claim
// fails as stale. Hooks
// (BeforeUpdate, AfterUpdate) do not run for the claim, and UpdatedAt is
// not touched. ctx bounds both statements. Errors are those of [Fenced],
// and a nil db, ctx or model, a token <= 0, a model with no fence column
// or no primary key value fail before anything is sent.
func Claim(ctx context.Context, db *gorm.DB, token fence.Token, model any) error {
	d, err := check(ctx, db, token)
	if err != nil {
		return err
	}
	s, f, err := parseModel(db, model)
	if err != nil {
		return err
	}
	return claim(ctx, db, d, token, model, s, f.DBName)
}

// claim is Claim after its checks. In PostgreSQL and SQLite (3.35.0 and
// later) the UPDATE returns the row (RETURNING *): one statement, and no
// other holder can come between the claim and the read. On PostgreSQL it
// tags its transaction (tagKey); on MySQL and PostgreSQL a wait for
// another transaction holding the row is watched (preempt.go).
func claim(ctx context.Context, db *gorm.DB, d sqlfence.Dialect, token fence.Token, model any, s *schema.Schema, column string) error {
	res := resource(ctx, s, s.Table, reflect.ValueOf(model).Elem())
	tx := db.Session(&gorm.Session{NewDB: true, Context: ctx, SkipHooks: true}).Model(model).Set(tagKey, res)
	if d != sqlfence.MySQL {
		tx = tx.Clauses(clause.Returning{})
	}
	var r *gorm.DB
	err := preempting(ctx, watch(ctx, db, d, s, column, res, token, model), func() error {
		r = tx.Scopes(Fenced(token)).Updates(map[string]any{})
		return r.Error
	})
	if err != nil {
		return err
	}
	if _, ok := r.Statement.Settings.Load(returnedKey); ok {
		return nil
	}
	return readClaimed(ctx, db, d, token, model, s.Table, column)
}

// readClaimed reads the row a claim raised: in MySQL, or where the
// dialector builds no RETURNING.
func readClaimed(ctx context.Context, db *gorm.DB, d sqlfence.Dialect, token fence.Token, model any, table, column string) error {
	q := db.Session(&gorm.Session{NewDB: true, Context: ctx})
	if d == sqlfence.MySQL {
		// A locking read reads the newest committed row, not the
		// transaction's REPEATABLE READ snapshot.
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	err := q.Take(model).Error
	rv := reflect.ValueOf(model).Elem()
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%w: %s (deleted after the claim)", ErrRowNotFound, table)
	case err != nil:
		return fmt.Errorf("gormfence: claimed %s, and reading it failed: %w", table, err)
	}
	cur := fenceOf(db, model, column)
	res := resource(ctx, q.Statement.Schema, table, rv)
	switch {
	case cur > token: // outside a transaction, a newer holder came between
		return &fence.StaleError{Resource: res, Token: token, Current: cur}
	case cur < token:
		return fmt.Errorf("gormfence: claimed %s with token %d, and read it back with fence %d: it was deleted and written again in between; claim again", res, token, cur)
	}
	return nil
}

// fenceOf reads the fence field of model (parsed already).
func fenceOf(db *gorm.DB, model any, column string) fence.Token {
	stmt := &gorm.Statement{DB: db}
	if stmt.Parse(model) != nil {
		return 0
	}
	f := stmt.Schema.LookUpField(column)
	v, _ := f.ValueOf(context.Background(), reflect.ValueOf(model).Elem())
	// Any integer, or a pointer to one (a nil one reads as 0).
	switch n := reflect.Indirect(reflect.ValueOf(v)); {
	case n.CanInt():
		return fence.Token(n.Int())
	case n.CanUint():
		return fence.Token(n.Uint())
	}
	return 0
}

// check refuses what every call needs before any I/O: a db with the
// plugin, a token > 0, a live context.
func check(ctx context.Context, db *gorm.DB, token fence.Token) (sqlfence.Dialect, error) {
	if db == nil || nilcheck.IsNil(db) || db.Config == nil {
		return 0, fmt.Errorf("%w: nil *gorm.DB", ErrInvalidArgument)
	}
	if _, ok := db.Config.Plugins[pluginName]; !ok {
		return 0, ErrNotRegistered
	}
	d, err := dialectOf(db)
	if err != nil {
		return 0, err
	}
	if err := token.Validate(); err != nil {
		return 0, err
	}
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return d, ctx.Err()
}
