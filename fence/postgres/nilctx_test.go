package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/postgres"
)

// TestNilContext: every entry point refuses a nil context with an error
// matching postgres.ErrInvalidArgument, before any I/O, never with a panic.
func TestNilContext(t *testing.T) {
	tbl, err := postgres.NewTable(pgx.Identifier{"t"})
	if err != nil {
		t.Fatal(err)
	}
	fences, err := postgres.NewFences(pgx.Identifier{"f"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := postgres.NewStore(noIO{t}, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	fn := func(pgx.Tx) error { return nil }
	tests := []struct {
		name string
		call func() error
	}{
		{"Table.Update", func() error { return tbl.Update(nilCtx, noIO{t}, "k", 1) }},
		{"Table.Upsert", func() error { return tbl.Upsert(nilCtx, noIO{t}, "k", 1) }},
		{"Table.CreateTrigger", func() error { return tbl.CreateTrigger(nilCtx, noIO{t}) }},
		{"Exec", func() error { _, err := postgres.Exec(nilCtx, noIO{t}, "r", 1, "DELETE FROM t"); return err }},
		{"RunInTx", func() error { return postgres.RunInTx(nilCtx, noIO{t}, "r", 1, fn) }},
		{"Fences.Advance", func() error { return fences.Advance(nilCtx, noIO{t}, "r", 1) }},
		{"Fences.Current", func() error { _, err := fences.Current(nilCtx, noIO{t}, "r"); return err }},
		{"Fences.CreateTable", func() error { return fences.CreateTable(nilCtx, noIO{t}) }},
		{"Store.Put", func() error { return store.Put(nilCtx, "k", 1, []byte("v")) }},
		{"Store.Delete", func() error { return store.Delete(nilCtx, "k", 1) }},
		{"Store.Get", func() error { _, err := store.Get(nilCtx, "k"); return err }},
		{"Store.CreateTable", func() error { return store.CreateTable(nilCtx) }},
		{"CreateSchema", func() error { return postgres.CreateSchema(nilCtx, noIO{t}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := noPanic(tt.call); !errors.Is(err, postgres.ErrInvalidArgument) {
				t.Fatalf("%s(nil ctx): got %v, want an error matching postgres.ErrInvalidArgument", tt.name, err)
			}
		})
	}
}

// noPanic runs call and turns a panic into an error.
func noPanic(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return call()
}
