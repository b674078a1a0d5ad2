package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func newStore(t *testing.T) (*postgres.Store, postgres.DB) {
	t.Helper()
	pool := pgtest.NewPool(t)
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, pool
}

func wantNotFound(t *testing.T, s *postgres.Store, key string) {
	t.Helper()
	if r, err := s.Get(t.Context(), key); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get(%q): got %+v, %v, want fence.ErrNotFound", key, r, err)
	}
}

// TestStoreDeleteKeepsFloor: Delete leaves a tombstone that Get reports as
// not found and that keeps the key's floor: a stale Put or Delete after it
// is refused, a newer Put writes the key again. The control deletes the row
// with plain SQL: the floor goes with it and the stale Put lands.
func TestStoreDeleteKeepsFloor(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "k", 34, []byte("v34")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k", 34); err != nil {
		t.Fatalf("Delete(token 34): got %v, want nil", err)
	}
	wantNotFound(t, s, "k")
	fencewant.Stale(t, s.Put(ctx, "k", 33, []byte("v33")), 33, 34)
	fencewant.Stale(t, s.Delete(ctx, "k", 33), 33, 34)
	wantNotFound(t, s, "k")
	if err := s.Put(ctx, "k", 35, []byte("v35")); err != nil {
		t.Fatalf("Put(token 35) after the delete: got %v, want nil", err)
	}
	if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "v35" || r.Token != 35 {
		t.Fatalf("Get: got %+v, %v, want v35 with token 35", r, err)
	}

	// A key never written gets a tombstone too.
	if err := s.Delete(ctx, "new", 5); err != nil {
		t.Fatalf("Delete of a missing key: got %v, want nil", err)
	}
	fencewant.Stale(t, s.Put(ctx, "new", 4, nil), 4, 5)
}

func TestStoreDeleteControl(t *testing.T) {
	s, pool := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "k", 34, []byte("v34")); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, "DELETE FROM fencelock_store WHERE key = 'k'")
	if err := s.Put(ctx, "k", 33, []byte("v33")); err != nil {
		t.Fatalf("control: stale Put after a plain DELETE: got %v, want nil (it lands)", err)
	}
}

// TestStoreDeleteOldSchema: a store table made before tombstones (value
// NOT NULL) cannot hold one: Delete says so, with ErrSchema, and writes
// nothing.
func TestStoreDeleteOldSchema(t *testing.T) {
	pool := pgtest.NewPool(t)
	mustExec(t, pool, "CREATE TABLE fencelock_store (key text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0), value bytea NOT NULL)")
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", 3, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "k", 4); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("Delete on a value NOT NULL table: got %v, want postgres.ErrSchema", err)
	}
	if r, err := s.Get(t.Context(), "k"); err != nil || r.Token != 3 {
		t.Fatalf("Get after the refused Delete: got %+v, %v, want token 3", r, err)
	}
}
