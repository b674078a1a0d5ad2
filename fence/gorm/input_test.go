package gormfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
)

// NoFence is a model without a fence column.
type NoFence struct {
	ID      string `gorm:"primaryKey"`
	Balance int64
}

// TextFence is a model whose fence column is not an integer.
type TextFence struct {
	ID    string `gorm:"primaryKey"`
	Fence string
}

// TestBadInput: each bad argument is refused with an error that matches
// fence.ErrInvalidArgument (or the context's error) and says what to add,
// before any I/O: the database's pool is closed, so any statement would
// fail with "sql: database is closed" instead.
func TestBadInput(t *testing.T) {
	db := openSQLite(t)
	if err := pool(t, db).Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := gorm.Open(db.Dialector, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool(t, plain).Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	noop := func(*gorm.DB) error { return nil }
	var nilCtx context.Context
	tests := []struct {
		name string
		err  func() error
		want error
		says string
	}{
		{"Claim nil db", func() error { return gormfence.Claim(ctx, nil, 1, &Account{ID: "a"}) }, gormfence.ErrInvalidArgument, "nil *gorm.DB"},
		{"Claim token 0", func() error { return gormfence.Claim(ctx, db, 0, &Account{ID: "a"}) }, fence.ErrInvalidToken, "token"},
		{"Claim nil context", func() error { return gormfence.Claim(nilCtx, db, 1, &Account{ID: "a"}) }, gormfence.ErrInvalidArgument, "nil context"},
		{"Claim cancelled context", func() error { return gormfence.Claim(cancelled, db, 1, &Account{ID: "a"}) }, context.Canceled, ""},
		{"Claim nil model", func() error { return gormfence.Claim(ctx, db, 1, nil) }, gormfence.ErrInvalidArgument, "pointer to a struct"},
		{"Claim model not a pointer", func() error { return gormfence.Claim(ctx, db, 1, Account{ID: "a"}) }, gormfence.ErrInvalidArgument, "pointer to a struct"},
		{"Claim no fence column", func() error { return gormfence.Claim(ctx, db, 1, &NoFence{ID: "a"}) }, gormfence.ErrNoFenceColumn, "Fence int64"},
		{"Claim text fence column", func() error { return gormfence.Claim(ctx, db, 1, &TextFence{ID: "a"}) }, gormfence.ErrNoFenceColumn, "declare it int64"},
		{"Claim zero primary key", func() error { return gormfence.Claim(ctx, db, 1, &Account{}) }, gormfence.ErrInvalidArgument, "primary key ID is zero"},
		{"Claim without the plugin", func() error { return gormfence.Claim(ctx, plain, 1, &Account{ID: "a"}) }, gormfence.ErrNotRegistered, "db.Use(gormfence.Plugin{})"},
		{"Update nil fn", func() error { return gormfence.Update(ctx, db, 1, &Account{ID: "a"}, nil) }, gormfence.ErrInvalidArgument, "nil fn"},
		{"Update token -1", func() error { return gormfence.Update(ctx, db, -1, &Account{ID: "a"}, noop) }, fence.ErrInvalidToken, "token"},
		{"Update no fence column", func() error { return gormfence.Update(ctx, db, 1, &NoFence{ID: "a"}, noop) }, gormfence.ErrNoFenceColumn, "Fence int64"},
		{"Fenced token 0", func() error { return fencedUpdate(db, "a", 0, 1) }, fence.ErrInvalidToken, "Fenced(0)"},
		{"Fenced without the plugin", func() error { return fencedUpdate(plain, "a", 1, 1) }, gormfence.ErrNotRegistered, "db.Use"},
		{"Fenced no fence column", func() error {
			return db.Scopes(gormfence.Fenced(1)).Model(&NoFence{ID: "a"}).Update("balance", 1).Error
		}, gormfence.ErrNoFenceColumn, "Fence int64"},
		{"Fenced names no row", func() error {
			return db.Scopes(gormfence.Fenced(1)).Model(&Account{}).Update("balance", 1).Error
		}, gormfence.ErrInvalidArgument, "names no row"},
		{"Fenced cancelled context, outside a transaction", func() error {
			return fencedUpdate(db.Session(&gorm.Session{SkipDefaultTransaction: true}).WithContext(cancelled), "a", 1, 1)
		}, context.Canceled, "nothing was written"},
		{"Fenced create", func() error { return db.Scopes(gormfence.Fenced(1)).Create(&Account{ID: "n"}).Error }, gormfence.ErrInvalidArgument, "not a create"},
		{"Fenced delete", func() error { return db.Scopes(gormfence.Fenced(1)).Delete(&Account{ID: "a"}).Error }, gormfence.ErrInvalidArgument, "not a delete"},
		{"Fenced query", func() error { return db.Scopes(gormfence.Fenced(1)).Take(&Account{ID: "a"}).Error }, gormfence.ErrInvalidArgument, "not a query"},
		{"Fenced raw SQL", func() error { return db.Scopes(gormfence.Fenced(1)).Exec("UPDATE accounts SET balance = 1").Error }, gormfence.ErrInvalidArgument, "not a raw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error matching %v", err, tt.want)
			}
			if tt.want != context.Canceled && !errors.Is(err, fence.ErrInvalidArgument) {
				t.Errorf("got %v, want it to match fence.ErrInvalidArgument too", err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %q, want it to say %q", err, tt.says)
			}
			if errors.Is(err, fence.ErrUnknownOutcome) {
				t.Errorf("got %v, want no unknown outcome: nothing was sent", err)
			}
			if strings.Contains(err.Error(), "closed") {
				t.Errorf("got %q: a statement was sent", err)
			}
		})
	}
}
