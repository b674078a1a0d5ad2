package gormfence

import (
	"context"
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// Update is a fenced read-compute-write of one row, in a transaction: it
// claims the row for token and reads it into model ([Claim]), calls fn,
// which changes model's fields (and may read or write other rows through
// tx, the same transaction), then writes every field of model back with
// the fence ([Fenced], as Select("*").Updates(model)), and commits:
//
//	acct := Account{ID: "acct-7"}
//	err := gormfence.Update(ctx, db, token, &acct, func(tx *gorm.DB) error {
//		acct.Balance -= 100
//		return nil
//	})
//
// The claim refuses a stale token before fn runs ([fence.ErrStale]), and
// holds the row's lock until the commit, so nothing comes between the read
// and the write. fn's error is returned as it is, after a rollback; a
// panic in fn rolls back and is passed on. Either way nothing is written.
// fn must not change model's primary key: the write would land on a row
// never claimed, so Update fails with [ErrInvalidArgument] instead, and
// writes nothing.
// A COMMIT whose answer was lost matches [fence.ErrUnknownOutcome]; a
// deadlock or busy lock matches [sqlfence.ErrRetryable], and running the
// whole Update again with the same token is safe.
//
// When db is a transaction already (inside db.Transaction), Update runs in
// it and does not commit: the write lands when that transaction commits.
// ctx bounds the whole call. A nil db, ctx, model or fn, a token <= 0, a
// model with no fence column or no primary key value fail before anything
// is sent.
func Update(ctx context.Context, db *gorm.DB, token fence.Token, model any, fn func(tx *gorm.DB) error) error {
	d, err := check(ctx, db, token)
	if err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: nil fn", ErrInvalidArgument)
	}
	s, f, err := parseModel(db, model)
	if err != nil {
		return err
	}
	body := func(tx *gorm.DB) error {
		if err := claim(ctx, tx, d, token, model, s, f.DBName); err != nil {
			return err
		}
		key := primaryKey(ctx, s, model)
		if err := fn(tx.Session(&gorm.Session{NewDB: true, Context: ctx})); err != nil {
			return err
		}
		if !reflect.DeepEqual(primaryKey(ctx, s, model), key) {
			// The write would land on another row, one never claimed.
			return fmt.Errorf("%w: fn changed %s's primary key; Update writes back the row it claimed (nothing was written)", ErrInvalidArgument, s.Name)
		}
		w := tx.Session(&gorm.Session{NewDB: true, Context: ctx})
		return w.Model(model).Scopes(Fenced(token)).Select("*").Updates(model).Error
	}
	if inTx(db.Statement.ConnPool) {
		return body(db.WithContext(ctx))
	}
	return inTransaction(ctx, db, d, token, s.Table, body)
}

// primaryKey returns the values of model's primary key (s is its schema).
func primaryKey(ctx context.Context, s *schema.Schema, model any) []any {
	v := reflect.ValueOf(model).Elem()
	key := make([]any, 0, len(s.PrimaryFields))
	for _, f := range s.PrimaryFields {
		pv, _ := f.ValueOf(ctx, v)
		key = append(key, pv)
	}
	return key
}

// inTransaction runs body in a transaction of its own and commits it,
// telling a COMMIT whose answer was lost as fence/sql tells its own.
func inTransaction(ctx context.Context, db *gorm.DB, d sqlfence.Dialect, token fence.Token, table string, body func(*gorm.DB) error) (err error) {
	tx := db.WithContext(ctx).Begin()
	if tx.Error != nil {
		return fmt.Errorf("gormfence: begin a transaction for %s (nothing written): %w", table, tx.Error)
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	if err := body(tx); err != nil {
		return err
	}
	done = true
	if err := tx.Commit().Error; err != nil {
		return d.CommitError(table, token, err)
	}
	return nil
}
