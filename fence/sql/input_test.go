package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// noIO is a handle that fails the test if anything is sent through it.
type noIO struct{ t *testing.T }

func (n noIO) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	n.t.Error("ExecContext called: want the call refused before any I/O")
	return nil, errors.New("no I/O")
}

func (n noIO) QueryRowContext(context.Context, string, ...any) *sql.Row {
	n.t.Error("QueryRowContext called: want the call refused before any I/O")
	return nil
}

func (n noIO) BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error) {
	n.t.Error("BeginTx called: want the call refused before any I/O")
	return nil, errors.New("no I/O")
}

// TestInvalidInput: bad input is an error of the ErrInvalidArgument family
// (fence's invalid key and token errors included), before any I/O, never a
// panic.
func TestInvalidInput(t *testing.T) {
	db := noIO{t}
	var nilDB *sql.DB
	tbl, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"t"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := sqlfence.NewFences(sqlfence.SQLite, sqlfence.Identifier{"f"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var nilCtx context.Context
	fn := func(*sql.Tx) error { return nil }
	cols := []string{"balance"}
	var v int64
	two := []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"NewTable: no dialect", func() error { _, err := sqlfence.NewTable(0, sqlfence.Identifier{"t"}); return err }, sqlfence.ErrInvalidOption},
		{"NewTable: empty name", func() error { _, err := sqlfence.NewTable(sqlfence.MySQL, nil); return err }, sqlfence.ErrInvalidIdentifier},
		{"NewTable: empty part", func() error { _, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{"a", ""}); return err }, sqlfence.ErrInvalidIdentifier},
		{"NewTable: nil option", func() error { _, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"t"}, nil); return err }, sqlfence.ErrInvalidOption},
		{"NewTable: key is fence", func() error {
			_, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"t"}, sqlfence.WithKeyColumn("fence"))
			return err
		}, sqlfence.ErrInvalidOption},
		{"NewTable: negative retries", func() error {
			_, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"t"}, sqlfence.WithRetries(-1))
			return err
		}, sqlfence.ErrInvalidOption},
		{"NewStore: nil db", func() error { _, err := sqlfence.NewStore(nil, sqlfence.MySQL, sqlfence.Identifier{"s"}); return err }, sqlfence.ErrInvalidArgument},
		{"NewStore: typed nil db", func() error { _, err := sqlfence.NewStore(nilDB, sqlfence.MySQL, sqlfence.Identifier{"s"}); return err }, sqlfence.ErrInvalidArgument},
		{"NewFences: bad dialect", func() error { _, err := sqlfence.NewFences(9, sqlfence.Identifier{"f"}); return err }, sqlfence.ErrInvalidOption},
		{"Update: nil ctx", func() error { return tbl.Update(nilCtx, db, "k", 1) }, sqlfence.ErrInvalidArgument},
		{"Update: nil db", func() error { return tbl.Update(ctx, nil, "k", 1) }, sqlfence.ErrInvalidArgument},
		{"Update: typed nil db", func() error { return tbl.Update(ctx, nilDB, "k", 1) }, sqlfence.ErrInvalidArgument},
		{"Update: empty key", func() error { return tbl.Update(ctx, db, "", 1) }, fence.ErrInvalidKey},
		{"Update: nil key", func() error { return tbl.Update(ctx, db, nil, 1) }, fence.ErrInvalidKey},
		{"Update: zero token", func() error { return tbl.Update(ctx, db, "k", 0) }, fence.ErrInvalidToken},
		{"Update: fence column", func() error { return tbl.Update(ctx, db, "k", 1, sqlfence.Set("fence", 1)) }, sqlfence.ErrInvalidArgument},
		{"Update: column twice", func() error {
			return tbl.Update(ctx, db, "k", 1, sqlfence.Set("a", 1), sqlfence.Set("a", 2))
		}, sqlfence.ErrInvalidArgument},
		{"Upsert: bad column", func() error { return tbl.Upsert(ctx, db, "k", 1, sqlfence.Set("", 1)) }, sqlfence.ErrInvalidIdentifier},
		{"RunInTx: nil fn", func() error { return f.RunInTx(ctx, db, "r", 1, nil) }, sqlfence.ErrInvalidArgument},
		{"RunInTx: nil db", func() error { return f.RunInTx(ctx, nil, "r", 1, fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTx: empty resource", func() error { return f.RunInTx(ctx, db, "", 1, fn) }, fence.ErrInvalidKey},
		{"RunInTx: negative token", func() error { return f.RunInTx(ctx, db, "r", -1, fn) }, fence.ErrInvalidToken},
		{"RunInTx: read-only", func() error {
			return f.RunInTx(ctx, db, "r", 1, fn, sqlfence.WithTxOptions(sql.TxOptions{ReadOnly: true}))
		}, sqlfence.ErrInvalidOption},
		{"RunInTx: nil option", func() error { return f.RunInTx(ctx, db, "r", 1, fn, nil) }, sqlfence.ErrInvalidOption},
		{"RunInTx: zero preempt wait", func() error { return f.RunInTx(ctx, db, "r", 1, fn, sqlfence.WithPreemptAfter(0)) }, sqlfence.ErrInvalidOption},
		{"RunInTx: negative preempt wait", func() error {
			return f.RunInTx(ctx, db, "r", 1, fn, sqlfence.WithPreemptAfter(-time.Second))
		}, sqlfence.ErrInvalidOption},
		{"Advance: nil ctx", func() error { return f.Advance(nilCtx, db, "r", 1) }, sqlfence.ErrInvalidArgument},
		{"Current: empty resource", func() error { _, err := f.Current(ctx, db, ""); return err }, fence.ErrInvalidKey},
		{"CreateSchema: nil db", func() error { return sqlfence.CreateSchema(ctx, nil, sqlfence.MySQL) }, sqlfence.ErrInvalidArgument},
		{"Add: fence column", func() error { return tbl.Update(ctx, db, "k", 1, sqlfence.Add("fence", 1)) }, sqlfence.ErrInvalidArgument},
		{"Add: nil amount", func() error { return tbl.Update(ctx, db, "k", 1, sqlfence.Add("a", nil)) }, sqlfence.ErrInvalidArgument},
		{"Add: a string amount", func() error { return tbl.Update(ctx, db, "k", 1, sqlfence.Add("a", "abc")) }, sqlfence.ErrInvalidArgument},
		{"Add: a bool amount", func() error { return tbl.Upsert(ctx, db, "k", 1, sqlfence.Add("a", true)) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: destination not a pointer", func() error { return tbl.GetForUpdate(ctx, db, "k", 1, cols, v) }, sqlfence.ErrInvalidArgument},
		{"Add: empty column", func() error { return tbl.Upsert(ctx, db, "k", 1, sqlfence.Add("", 1)) }, sqlfence.ErrInvalidIdentifier},
		{"Add and Set of one column", func() error {
			return tbl.Update(ctx, db, "k", 1, sqlfence.Set("a", 1), sqlfence.Add("a", 2))
		}, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: nil ctx", func() error { return tbl.GetForUpdate(nilCtx, db, "k", 1, cols, &v) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: nil db", func() error { return tbl.GetForUpdate(ctx, nil, "k", 1, cols, &v) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: typed nil db", func() error { return tbl.GetForUpdate(ctx, nilDB, "k", 1, cols, &v) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: empty key", func() error { return tbl.GetForUpdate(ctx, db, "", 1, cols, &v) }, fence.ErrInvalidKey},
		{"GetForUpdate: zero token", func() error { return tbl.GetForUpdate(ctx, db, "k", 0, cols, &v) }, fence.ErrInvalidToken},
		{"GetForUpdate: fewer destinations", func() error { return tbl.GetForUpdate(ctx, db, "k", 1, cols) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: more destinations", func() error { return tbl.GetForUpdate(ctx, db, "k", 1, nil, &v) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: nil destination", func() error { return tbl.GetForUpdate(ctx, db, "k", 1, cols, nil) }, sqlfence.ErrInvalidArgument},
		{"GetForUpdate: empty column", func() error { return tbl.GetForUpdate(ctx, db, "k", 1, []string{""}, &v) }, sqlfence.ErrInvalidIdentifier},
		{"RunInTxAll: nil fn", func() error { return f.RunInTxAll(ctx, db, two, nil) }, sqlfence.ErrInvalidArgument},
		{"RunInTxAll: nil db", func() error { return f.RunInTxAll(ctx, nil, two, fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTxAll: nil ctx", func() error { return f.RunInTxAll(nilCtx, db, two, fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTxAll: no claims", func() error { return f.RunInTxAll(ctx, db, nil, fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTxAll: empty claims", func() error { return f.RunInTxAll(ctx, db, []fence.Claim{}, fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTxAll: empty resource", func() error {
			return f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "a", Token: 1}, {Token: 1}}, fn)
		}, fence.ErrInvalidKey},
		{"RunInTxAll: zero token", func() error {
			return f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b"}}, fn)
		}, fence.ErrInvalidToken},
		{"RunInTxAll: one resource, two tokens", func() error {
			return f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}, {Resource: "a", Token: 2}}, fn)
		}, sqlfence.ErrInvalidArgument},
		{"RunInTxAll: read-only", func() error {
			return f.RunInTxAll(ctx, db, two, fn, sqlfence.WithTxOptions(sql.TxOptions{ReadOnly: true}))
		}, sqlfence.ErrInvalidOption},
		{"RunInTxHeld: nil", func() error { return f.RunInTxHeld(ctx, db, nil, fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTxHeld: typed nil", func() error { return f.RunInTxHeld(ctx, db, (*claimList)(nil), fn) }, sqlfence.ErrInvalidArgument},
		{"RunInTxHeld: no claims", func() error { return f.RunInTxHeld(ctx, db, &claimList{}, fn) }, sqlfence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want an error matching %v and fence.ErrInvalidArgument", err, tt.want)
			}
		})
	}
}

// TestHostileNames: names holding every dialect's quote characters name
// exactly that table on the server.
func TestHostileNames(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db := srv.open(t)
		name := "we`ird\"na'me;--"
		s, err := sqlfence.NewStore(db, srv.d, sqlfence.Identifier{name})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateTable(t.Context()); err != nil {
			t.Fatalf("CreateTable: got %v, want nil", err)
		}
		if err := s.Put(t.Context(), "k", 1, []byte("v")); err != nil {
			t.Fatalf("Put: got %v, want nil", err)
		}
		var n int
		q := map[sqlfence.Dialect]string{sqlfence.MySQL: "SELECT COUNT(*) FROM `we``ird\"na'me;--`"}[srv.d]
		if q == "" {
			q = `SELECT COUNT(*) FROM "we` + "`" + `ird""na'me;--"`
		}
		if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: got %d, %v, want 1 row", q, n, err)
		}
	})
}

// TestMissingTable: a write to a table that does not exist matches
// ErrSchema and is a known failure.
func TestMissingTable(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db := srv.open(t)
		tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"nope"})
		if err != nil {
			t.Fatal(err)
		}
		for _, write := range []func() error{
			func() error { return tbl.Update(t.Context(), db, "k", 1) },
			func() error { return tbl.Upsert(t.Context(), db, "k", 1) },
		} {
			if err := write(); !errors.Is(err, sqlfence.ErrSchema) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Errorf("got %v, want ErrSchema (and no unknown outcome)", err)
			}
		}
	})
}

// A zero or nil Table, Fences or Store, which the docs call not usable,
// gives ErrInvalidArgument on every method, not a panic.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	db := openSQLite(t)
	var nilTable *sqlfence.Table
	var nilFences *sqlfence.Fences
	var nilStore *sqlfence.Store
	body := func(*sql.Tx) error { return nil }
	for name, call := range map[string]func() error{
		"Table.Update":       func() error { return (&sqlfence.Table{}).Update(ctx, db, "k", 1) },
		"Table.Upsert":       func() error { return (&sqlfence.Table{}).Upsert(ctx, db, "k", 1) },
		"nil Table.Update":   func() error { return nilTable.Update(ctx, db, "k", 1) },
		"Fences.RunInTx":     func() error { return (&sqlfence.Fences{}).RunInTx(ctx, db, "r", 1, body) },
		"Fences.Exec":        func() error { _, err := (&sqlfence.Fences{}).Exec(ctx, db, "r", 1, "SELECT 1"); return err },
		"Fences.Advance":     func() error { return (&sqlfence.Fences{}).Advance(ctx, db, "r", 1) },
		"Fences.Current":     func() error { _, err := (&sqlfence.Fences{}).Current(ctx, db, "r"); return err },
		"Fences.CreateTable": func() error { return (&sqlfence.Fences{}).CreateTable(ctx, db) },
		"nil Fences.RunInTx": func() error { return nilFences.RunInTx(ctx, db, "r", 1, body) },
		"Store.Put":          func() error { return (&sqlfence.Store{}).Put(ctx, "k", 1, nil) },
		"Store.Delete":       func() error { return (&sqlfence.Store{}).Delete(ctx, "k", 1) },
		"Store.Get":          func() error { _, err := (&sqlfence.Store{}).Get(ctx, "k"); return err },
		"Store.CreateTable":  func() error { return (&sqlfence.Store{}).CreateTable(ctx) },
		"nil Store.Put":      func() error { return nilStore.Put(ctx, "k", 1, nil) },
		"Table.GetForUpdate": func() error {
			var v int64
			return (&sqlfence.Table{}).GetForUpdate(ctx, db, "k", 1, []string{"v"}, &v)
		},
		"Fences.RunInTxAll": func() error {
			return nilFences.RunInTxAll(ctx, db, []fence.Claim{{Resource: "r", Token: 1}}, body)
		},
		"Store.GetForUpdate": func() error { _, err := (&sqlfence.Store{}).GetForUpdate(ctx, "k", 1); return err },
		"Store.Update": func() error {
			return nilStore.Update(ctx, "k", 1, func(fence.Record) ([]byte, error) { return nil, nil })
		},
	} {
		if err := call(); !errors.Is(err, sqlfence.ErrInvalidArgument) {
			t.Errorf("%s on a zero value: got %v, want ErrInvalidArgument", name, err)
		}
	}
}
