package outboxgrpc_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestOnPostgres runs the duplicate and stale cases over a real fenced
// store, fence/postgres's Store.
func TestOnPostgres(t *testing.T) {
	testenv.Long(t, "starts a PostgreSQL server")
	pool := pgtest.NewPool(t)
	store, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Run("duplicate", func(t *testing.T) { testDuplicateRunsOnce(t, store) })
	t.Run("stale", func(t *testing.T) { testStaleTokenRefused(t, store) })
}
