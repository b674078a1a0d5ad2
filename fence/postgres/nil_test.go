package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
)

// TestNilContext: every entry point refuses a nil context with an error
// matching postgres.ErrInvalidArgument, before any I/O, never with a panic.
func TestNilContext(t *testing.T) {
	tbl, fences := tableAndFences(t)
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
		{"Store.GetForUpdate", func() error { _, err := store.GetForUpdate(nilCtx, "k", 1); return err }},
		{"Store.Update", func() error {
			return store.Update(nilCtx, "k", 1, func(fence.Record) ([]byte, error) { return nil, nil })
		}},
		{"Table.GetForUpdate", func() error { return tbl.GetForUpdate(nilCtx, noIO{t}, "k", 1, nil) }},
		{"RunInTxAll", func() error {
			return postgres.RunInTxAll(nilCtx, noIO{t}, []fence.Claim{{Resource: "r", Token: 1}}, fn)
		}},
		{"RunInTxHeld", func() error { return postgres.RunInTxHeld(nilCtx, noIO{t}, held{{Resource: "r", Token: 1}}, fn) }},
		{"CreateSchema", func() error { return postgres.CreateSchema(nilCtx, noIO{t}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := nilchecktest.NoPanic(tt.call); !errors.Is(err, postgres.ErrInvalidArgument) {
				t.Fatalf("%s(nil ctx): got %v, want an error matching postgres.ErrInvalidArgument", tt.name, err)
			}
		})
	}
}

// TestNilHandle: every entry point refuses a nil handle, and a typed nil
// one (a nil *pgxpool.Pool or *pgx.Conn, as an ignored error leaves), with an
// error matching postgres.ErrInvalidArgument, never with a panic.
func TestNilHandle(t *testing.T) {
	tbl, fences := tableAndFences(t)
	fn := func(pgx.Tx) error { return nil }
	ctx := t.Context()
	calls := []struct {
		name string
		call func(db *pgx.Conn) error // db is nil; each call passes it as the interface it takes
	}{
		{"NewStore", func(db *pgx.Conn) error { _, err := postgres.NewStore(db, pgx.Identifier{"s"}); return err }},
		{"Table.Update", func(db *pgx.Conn) error { return tbl.Update(ctx, db, "k", 1) }},
		{"Table.Upsert", func(db *pgx.Conn) error { return tbl.Upsert(ctx, db, "k", 1) }},
		{"Table.CreateTrigger", func(db *pgx.Conn) error { return tbl.CreateTrigger(ctx, db) }},
		{"Exec", func(db *pgx.Conn) error { _, err := postgres.Exec(ctx, db, "r", 1, "DELETE FROM t"); return err }},
		{"RunInTx", func(db *pgx.Conn) error { return postgres.RunInTx(ctx, db, "r", 1, fn) }},
		{"Fences.Advance", func(db *pgx.Conn) error { return fences.Advance(ctx, db, "r", 1) }},
		{"Fences.Current", func(db *pgx.Conn) error { _, err := fences.Current(ctx, db, "r"); return err }},
		{"Fences.CreateTable", func(db *pgx.Conn) error { return fences.CreateTable(ctx, db) }},
		{"CreateSchema", func(db *pgx.Conn) error { return postgres.CreateSchema(ctx, db) }},
		{"Table.GetForUpdate", func(db *pgx.Conn) error { return tbl.GetForUpdate(ctx, db, "k", 1, nil) }},
		{"RunInTxAll", func(db *pgx.Conn) error {
			return postgres.RunInTxAll(ctx, db, []fence.Claim{{Resource: "r", Token: 1}}, fn)
		}},
		{"RunInTxHeld", func(db *pgx.Conn) error { return postgres.RunInTxHeld(ctx, db, held{{Resource: "r", Token: 1}}, fn) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := nilchecktest.NoPanic(func() error { return c.call(nil) }); !errors.Is(err, postgres.ErrInvalidArgument) {
				t.Fatalf("%s(typed nil *pgx.Conn): got %v, want an error matching postgres.ErrInvalidArgument", c.name, err)
			}
		})
	}
	// The untyped nil and a typed nil pool, on the two checks every call
	// above goes through (a DB and a TxBeginner).
	for _, db := range []postgres.DB{nil, (*pgxpool.Pool)(nil)} {
		if err := nilchecktest.NoPanic(func() error { return tbl.Update(ctx, db, "k", 1) }); !errors.Is(err, postgres.ErrInvalidArgument) {
			t.Errorf("Table.Update(%#v): got %v, want an error matching postgres.ErrInvalidArgument", db, err)
		}
	}
	for _, db := range []postgres.TxBeginner{nil, (*pgxpool.Pool)(nil)} {
		if err := nilchecktest.NoPanic(func() error { return postgres.RunInTx(ctx, db, "r", 1, fn) }); !errors.Is(err, postgres.ErrInvalidArgument) {
			t.Errorf("RunInTx(%#v): got %v, want an error matching postgres.ErrInvalidArgument", db, err)
		}
	}
}

// tableAndFences returns a Table "t" and a Fences "f", made without I/O.
func tableAndFences(t *testing.T) (*postgres.Table, *postgres.Fences) {
	t.Helper()
	tbl, err := postgres.NewTable(pgx.Identifier{"t"})
	if err != nil {
		t.Fatal(err)
	}
	fences, err := postgres.NewFences(pgx.Identifier{"f"})
	if err != nil {
		t.Fatal(err)
	}
	return tbl, fences
}

// TestZeroValues: a zero or nil Table, Fences or Store, made without its
// constructor, is refused with an error matching ErrInvalidArgument, never
// a panic, before any I/O.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	db := noIO{t}
	var (
		nilTable  *postgres.Table
		nilFences *postgres.Fences
		nilStore  *postgres.Store
	)
	fn := func(pgx.Tx) error { return nil }
	for name, call := range map[string]func() error{
		"Table.Update":        func() error { return (&postgres.Table{}).Update(ctx, db, "k", 1) },
		"Table.Upsert":        func() error { return (&postgres.Table{}).Upsert(ctx, db, "k", 1) },
		"Table.CreateTrigger": func() error { return (&postgres.Table{}).CreateTrigger(ctx, db) },
		"nil Table.Update":    func() error { return nilTable.Update(ctx, db, "k", 1) },
		"Fences.RunInTx":      func() error { return (&postgres.Fences{}).RunInTx(ctx, db, "r", 1, fn) },
		"Fences.Exec":         func() error { _, err := (&postgres.Fences{}).Exec(ctx, db, "r", 1, "SELECT 1"); return err },
		"Fences.Advance":      func() error { return (&postgres.Fences{}).Advance(ctx, db, "r", 1) },
		"Fences.Current":      func() error { _, err := (&postgres.Fences{}).Current(ctx, db, "r"); return err },
		"Fences.CreateTable":  func() error { return (&postgres.Fences{}).CreateTable(ctx, db) },
		"nil Fences.RunInTx":  func() error { return nilFences.RunInTx(ctx, db, "r", 1, fn) },
		"Store.Put":           func() error { return (&postgres.Store{}).Put(ctx, "k", 1, nil) },
		"Store.Delete":        func() error { return (&postgres.Store{}).Delete(ctx, "k", 1) },
		"Store.Get":           func() error { _, err := (&postgres.Store{}).Get(ctx, "k"); return err },
		"Store.CreateTable":   func() error { return (&postgres.Store{}).CreateTable(ctx) },
		"nil Store.Put":       func() error { return nilStore.Put(ctx, "k", 1, nil) },
		"Table.GetForUpdate":  func() error { return (&postgres.Table{}).GetForUpdate(ctx, db, "k", 1, nil) },
		"Fences.RunInTxAll": func() error {
			return (&postgres.Fences{}).RunInTxAll(ctx, db, []fence.Claim{{Resource: "r", Token: 1}}, fn)
		},
		"Fences.RunInTxHeld": func() error { return (&postgres.Fences{}).RunInTxHeld(ctx, db, held{{Resource: "r", Token: 1}}, fn) },
		"Store.GetForUpdate": func() error { _, err := (&postgres.Store{}).GetForUpdate(ctx, "k", 1); return err },
		"Store.Update": func() error {
			return (&postgres.Store{}).Update(ctx, "k", 1, func(fence.Record) ([]byte, error) { return nil, nil })
		},
		"nil Store.Update": func() error {
			return nilStore.Update(ctx, "k", 1, func(fence.Record) ([]byte, error) { return nil, nil })
		},
	} {
		if err := nilchecktest.NoPanic(call); !errors.Is(err, postgres.ErrInvalidArgument) {
			t.Errorf("%s on a zero value: got %v, want an error matching ErrInvalidArgument", name, err)
		}
	}
}
