package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func TestUpdate(t *testing.T) {
	tests := []struct {
		name        string
		exists      bool
		token       fence.Token
		wantErr     error
		wantCurrent fence.Token
		wantBalance int64
		wantFence   int64
	}{
		{name: "higher token lands", exists: true, token: 40, wantBalance: 999, wantFence: 40},
		{name: "equal token lands", exists: true, token: 34, wantBalance: 999, wantFence: 34},
		{name: "lower token refused", exists: true, token: 33, wantErr: fence.ErrStale, wantCurrent: 34, wantBalance: 120, wantFence: 34},
		{name: "missing row", token: 35, wantErr: postgres.ErrRowNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl := newAccounts(t)
			if tt.exists {
				mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 34)")
			}
			err := tbl.Update(t.Context(), pool, "a", tt.token, postgres.Set("balance", 999), postgres.Set("note", "x"))
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Update(token %d): got error %v, want nil", tt.token, err)
			case tt.wantErr == fence.ErrStale:
				fencewant.Stale(t, err, tt.token, tt.wantCurrent)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Update(token %d): got %v, want an error matching %v", tt.token, err, tt.wantErr)
			}
			if errors.Is(err, postgres.ErrRowNotFound) && errors.Is(err, fence.ErrStale) {
				t.Fatalf("Update of a missing row: got %v, which also matches fence.ErrStale", err)
			}
			if tt.exists {
				wantAccount(t, pool, "a", tt.wantBalance, tt.wantFence)
			} else if _, _, ok := account(t, pool, "a"); ok {
				t.Fatal("Update of a missing row created it")
			}
		})
	}
}

// TestUpdateControl is the control for TestUpdate: the same late write as a
// plain UPDATE, without the fence, lands over the newer holder's data.
func TestUpdateControl(t *testing.T) {
	pool, _ := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 120, 34)")
	mustExec(t, pool, "UPDATE accounts SET balance = $2, fence = $3 WHERE id = $1", "a", 999, 33)
	wantAccount(t, pool, "a", 999, 33)
}

func TestUpsert(t *testing.T) {
	pool, tbl := newAccounts(t)
	ctx := t.Context()
	if err := tbl.Upsert(ctx, pool, "a", 5, postgres.Set("note", "first")); err != nil {
		t.Fatalf("first Upsert: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 0, 5) // balance took its default
	if err := tbl.Upsert(ctx, pool, "a", 7, postgres.Set("balance", 70)); err != nil {
		t.Fatalf("Upsert with a higher token: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 70, 7)
	fencewant.Stale(t, tbl.Upsert(ctx, pool, "a", 6, postgres.Set("balance", 60)), 6, 7)
	wantAccount(t, pool, "a", 70, 7)
	if err := tbl.Upsert(ctx, pool, "a", 7, postgres.Set("balance", 71)); err != nil {
		t.Fatalf("Upsert with an equal token: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 71, 7)
	var note string
	if err := pool.QueryRow(ctx, "SELECT note FROM accounts WHERE id = 'a'").Scan(&note); err != nil || note != "first" {
		t.Fatalf("note: got %q (%v), want %q: an upsert must leave unassigned columns alone", note, err, "first")
	}
}

// TestUpsertControl: the plain upsert, without the fence condition, lets
// the late write land.
func TestUpsertControl(t *testing.T) {
	pool, _ := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 70, 7)")
	mustExec(t, pool, `INSERT INTO accounts (id, balance, fence) VALUES ('a', 60, 6)
		ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence`)
	wantAccount(t, pool, "a", 60, 6)
}

func TestUpdateInTx(t *testing.T) {
	pool, tbl := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 1)")
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if err := tbl.Update(t.Context(), tx, "a", 2, postgres.Set("balance", 2)); err != nil {
		t.Fatalf("Update in a transaction: got %v, want nil", err)
	}
	wantAccount(t, pool, "a", 1, 1) // not committed yet
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantAccount(t, pool, "a", 2, 2)
}

func TestHostileIdentifiers(t *testing.T) {
	pool := pgtest.NewPool(t)
	name := `x"; DROP TABLE y; --`
	col := `v"; DROP TABLE y; --`
	mustExec(t, pool, "CREATE TABLE y (id int)")
	mustExec(t, pool, "CREATE TABLE "+pgx.Identifier{name}.Sanitize()+
		" (key text PRIMARY KEY, "+pgx.Identifier{col}.Sanitize()+" text, fence bigint NOT NULL DEFAULT 0)")
	tbl, err := postgres.NewTable(pgx.Identifier{name})
	if err != nil {
		t.Fatalf("NewTable(%q): got %v, want nil", name, err)
	}
	if err := tbl.Upsert(t.Context(), pool, "k'; DROP TABLE y; --", 1, postgres.Set(col, "v1")); err != nil {
		t.Fatalf("Upsert: got %v, want nil", err)
	}
	if err := tbl.Update(t.Context(), pool, "k'; DROP TABLE y; --", 2, postgres.Set(col, "v2")); err != nil {
		t.Fatalf("Update: got %v, want nil", err)
	}
	var exists bool
	if err := pool.QueryRow(t.Context(), "SELECT to_regclass('y') IS NOT NULL").Scan(&exists); err != nil || !exists {
		t.Fatalf("table y after writes through hostile names: exists %v (%v), want true", exists, err)
	}
	var v string
	err = pool.QueryRow(t.Context(), "SELECT "+pgx.Identifier{col}.Sanitize()+" FROM "+pgx.Identifier{name}.Sanitize()).Scan(&v)
	if err != nil || v != "v2" {
		t.Fatalf("value written: got %q (%v), want %q", v, err, "v2")
	}
}

func TestNewTableInvalid(t *testing.T) {
	tests := []struct {
		name  string
		table pgx.Identifier
		opts  []postgres.TableOption
		want  error
	}{
		{"nil name", nil, nil, postgres.ErrInvalidIdentifier},
		{"empty name", pgx.Identifier{""}, nil, postgres.ErrInvalidIdentifier},
		{"empty schema part", pgx.Identifier{"", "t"}, nil, postgres.ErrInvalidIdentifier},
		{"NUL byte", pgx.Identifier{"a\x00b"}, nil, postgres.ErrInvalidIdentifier},
		{"too long", pgx.Identifier{strings.Repeat("t", 64)}, nil, postgres.ErrInvalidIdentifier},
		{"empty key column", pgx.Identifier{"t"}, []postgres.TableOption{postgres.WithKeyColumn("")}, postgres.ErrInvalidIdentifier},
		{"empty fence column", pgx.Identifier{"t"}, []postgres.TableOption{postgres.WithFenceColumn("")}, postgres.ErrInvalidIdentifier},
		{"key is fence", pgx.Identifier{"t"}, []postgres.TableOption{postgres.WithKeyColumn("fence")}, postgres.ErrInvalidOption},
		{"nil option", pgx.Identifier{"t"}, []postgres.TableOption{nil}, postgres.ErrInvalidOption},
		{"nil meter provider", pgx.Identifier{"t"}, []postgres.TableOption{postgres.WithMeterProvider(nil)}, postgres.ErrInvalidOption},
		{"nil tracer provider", pgx.Identifier{"t"}, []postgres.TableOption{postgres.WithTracerProvider(nil)}, postgres.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := postgres.NewTable(tt.table, tt.opts...)
			if !errors.Is(err, tt.want) {
				t.Fatalf("NewTable: got %v, want an error matching %v", err, tt.want)
			}
			// A name is refused as a name; a bad column name as an option too.
			if opt := tt.opts != nil; errors.Is(err, postgres.ErrInvalidOption) != opt {
				t.Fatalf("NewTable: got %v; matches postgres.ErrInvalidOption: got %v, want %v", err, !opt, opt)
			}
		})
	}
	if _, err := postgres.NewTable(pgx.Identifier{strings.Repeat("t", 63)}); err != nil {
		t.Errorf("NewTable with a 63-byte name: got %v, want nil", err)
	}
}

func TestWriteInvalidInput(t *testing.T) {
	tbl, err := postgres.NewTable(pgx.Identifier{"t"})
	if err != nil {
		t.Fatal(err)
	}
	ok := []postgres.Assignment{postgres.Set("v", 1)}
	tests := []struct {
		name  string
		db    postgres.DB
		key   any
		token fence.Token
		set   []postgres.Assignment
		want  error
	}{
		{"nil DB", nil, "k", 1, ok, postgres.ErrInvalidArgument},
		{"typed nil pool", (*pgxpool.Pool)(nil), "k", 1, ok, postgres.ErrInvalidArgument},
		{"empty key", noIO{t}, "", 1, ok, fence.ErrInvalidKey},
		{"nil key", noIO{t}, nil, 1, ok, fence.ErrInvalidKey},
		{"zero token", noIO{t}, "k", 0, ok, fence.ErrInvalidToken},
		{"negative token", noIO{t}, "k", -1, ok, fence.ErrInvalidToken},
		{"empty column", noIO{t}, "k", 1, []postgres.Assignment{{}}, postgres.ErrInvalidIdentifier},
		{"column twice", noIO{t}, "k", 1, []postgres.Assignment{postgres.Set("v", 1), postgres.Set("v", 2)}, postgres.ErrInvalidArgument},
		{"fence column assigned", noIO{t}, "k", 1, []postgres.Assignment{postgres.Set("fence", 1)}, postgres.ErrInvalidArgument},
		{"key column assigned", noIO{t}, "k", 1, []postgres.Assignment{postgres.Set("key", 1)}, postgres.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tbl.Update(t.Context(), tt.db, tt.key, tt.token, tt.set...); !errors.Is(err, tt.want) {
				t.Errorf("Update: got %v, want an error matching %v", err, tt.want)
			}
			if err := tbl.Upsert(t.Context(), tt.db, tt.key, tt.token, tt.set...); !errors.Is(err, tt.want) {
				t.Errorf("Upsert: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		err := tbl.Update(cancelled(t), noIO{t}, "k", 1, ok...)
		if !errors.Is(err, context.Canceled) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("Update with a cancelled context: got %v, want context.Canceled and not fence.ErrUnknownOutcome", err)
		}
	})
}

func TestSchemaErrors(t *testing.T) {
	pool, _ := newAccounts(t)
	mustExec(t, pool, "CREATE TABLE nokey (id text, fence bigint NOT NULL DEFAULT 0)")
	missing, _ := postgres.NewTable(pgx.Identifier{"no_such_table"})
	nokey, _ := postgres.NewTable(pgx.Identifier{"nokey"}, postgres.WithKeyColumn("id"))
	accounts, _ := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	tests := []struct {
		name  string
		write func() error
		code  string
	}{
		{"unknown table", func() error { return missing.Update(t.Context(), pool, "k", 1) }, "42P01"},
		{"unknown column", func() error {
			return accounts.Update(t.Context(), pool, "k", 1, postgres.Set("no_such_column", 1))
		}, "42703"},
		{"upsert without unique key", func() error { return nokey.Upsert(t.Context(), pool, "k", 1) }, "42P10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.write()
			if !errors.Is(err, postgres.ErrSchema) {
				t.Fatalf("got %v, want an error matching postgres.ErrSchema", err)
			}
			wantPgCode(t, err, tt.code)
			if errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
				t.Fatalf("got %v, want neither fence.ErrUnknownOutcome nor fence.ErrStale", err)
			}
		})
	}
}
