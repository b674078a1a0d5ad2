package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func TestStoreConformance(t *testing.T) {
	pool := pgtest.NewPool(t)
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatalf("NewStore: got error %v, want nil", err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatalf("CreateTable: got error %v, want nil", err)
	}
	fencetest.Run(t, func(*testing.T) fence.Store { return s })
}

func TestCreateSchema(t *testing.T) {
	pool := pgtest.NewPool(t)
	for range 2 { // idempotent
		if err := postgres.CreateSchema(t.Context(), pool); err != nil {
			t.Fatalf("CreateSchema: got error %v, want nil", err)
		}
	}
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", 1, nil); err != nil {
		t.Errorf("Store.Put after CreateSchema: got %v, want nil", err)
	}
	if err := postgres.RunInTx(t.Context(), pool, "r", 1, func(pgx.Tx) error { return nil }); err != nil {
		t.Errorf("RunInTx after CreateSchema: got %v, want nil", err)
	}
}

func TestStoreCustomTable(t *testing.T) {
	pool := pgtest.NewPool(t)
	mustExec(t, pool, "CREATE SCHEMA app")
	s, err := postgres.NewStore(pool, pgx.Identifier{"app", "records"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatalf("CreateTable: got %v, want nil", err)
	}
	if err := s.Put(t.Context(), "k", 3, []byte("v")); err != nil {
		t.Fatalf("Put: got %v, want nil", err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM app.records").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in app.records: got %d (%v), want 1", n, err)
	}
}

func TestNewStoreInvalid(t *testing.T) {
	def := pgx.Identifier{postgres.DefaultStoreTable}
	tests := []struct {
		name  string
		db    postgres.DB
		table pgx.Identifier
		want  error
	}{
		{"nil DB", nil, def, postgres.ErrInvalidArgument},
		{"typed nil pool", (*pgxpool.Pool)(nil), def, postgres.ErrInvalidArgument},
		{"nil table", noIO{t}, nil, postgres.ErrInvalidIdentifier},
		{"empty table part", noIO{t}, pgx.Identifier{"app", ""}, postgres.ErrInvalidIdentifier},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := postgres.NewStore(tt.db, tt.table); !errors.Is(err, tt.want) {
				t.Fatalf("NewStore: got %v, want an error matching %v", err, tt.want)
			}
		})
	}
}
