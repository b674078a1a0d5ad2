package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestMissingColumns: the first write of a Table whose key or fence column
// the table lacks fails with ErrSchema, before writing, and says which
// column is missing; for the fence column it gives the ALTER TABLE that
// adds it, which, run, makes the next write land.
func TestMissingColumns(t *testing.T) {
	writes := []struct {
		name  string
		write func(ctx context.Context, tbl *postgres.Table, db postgres.DB) error
	}{
		{"Update", func(ctx context.Context, tbl *postgres.Table, db postgres.DB) error {
			return tbl.Update(ctx, db, "r1", 5, postgres.Set("state", 1))
		}},
		{"Upsert", func(ctx context.Context, tbl *postgres.Table, db postgres.DB) error {
			return tbl.Upsert(ctx, db, "r1", 5, postgres.Set("state", 1))
		}},
	}
	tests := []struct {
		name     string
		create   string
		table    pgx.Identifier
		opts     []postgres.TableOption
		want     []string // in the error
		fixAlter bool     // the error's ALTER TABLE makes the write land
	}{
		{"no key column", "CREATE TABLE billing_runs (id text PRIMARY KEY, state int, fence bigint NOT NULL DEFAULT 0)",
			pgx.Identifier{"billing_runs"}, nil, []string{`billing_runs has no key column "key"`, "WithKeyColumn"}, false},
		{"no fence column", "CREATE TABLE billing_runs (id text PRIMARY KEY, state int)",
			pgx.Identifier{"billing_runs"}, []postgres.TableOption{postgres.WithKeyColumn("id")},
			[]string{`no fence column "fence"`, `ALTER TABLE "billing_runs" ADD COLUMN "fence" bigint NOT NULL DEFAULT 0`}, true},
		{"no fence column, schema and names quoted", `CREATE SCHEMA "Billing"; CREATE TABLE "Billing"."Runs" (id text PRIMARY KEY, state int)`,
			pgx.Identifier{"Billing", "Runs"}, []postgres.TableOption{postgres.WithKeyColumn("id"), postgres.WithFenceColumn("Fence Token")},
			[]string{`ALTER TABLE "Billing"."Runs" ADD COLUMN "Fence Token" bigint NOT NULL DEFAULT 0`}, true},
		{"neither", "CREATE TABLE billing_runs (id text PRIMARY KEY, state int)",
			pgx.Identifier{"billing_runs"}, nil, []string{`no key column "key"`, `ADD COLUMN "fence" bigint`}, false},
	}
	for _, w := range writes {
		for _, tt := range tests {
			t.Run(w.name+"/"+tt.name, func(t *testing.T) {
				pool := pgtest.NewPool(t)
				mustExec(t, pool, tt.create)
				mustExec(t, pool, "INSERT INTO "+tt.table.Sanitize()+" (id, state) VALUES ('r1', 0)")
				tbl, err := postgres.NewTable(tt.table, tt.opts...)
				if err != nil {
					t.Fatal(err)
				}
				err = w.write(t.Context(), tbl, pool)
				if !errors.Is(err, postgres.ErrSchema) || errors.Is(err, fence.ErrUnknownOutcome) {
					t.Fatalf("got %v, want an error matching postgres.ErrSchema and not fence.ErrUnknownOutcome", err)
				}
				for _, want := range tt.want {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("got %q, want it to contain %q", err, want)
					}
				}
				if strings.Contains(err.Error(), "unique index") {
					t.Fatalf("got %q, want no word of unique indexes for a missing column", err)
				}
				if !tt.fixAlter {
					return
				}
				_, alter, _ := strings.Cut(err.Error(), "add it with: ")
				mustExec(t, pool, alter)
				if err := w.write(t.Context(), tbl, pool); err != nil {
					t.Fatalf("%s after %s: got %v, want nil", w.name, alter, err)
				}
			})
		}
	}
}
