package pgadvisory_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestMain starts the PostgreSQL server every test in this package shares.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// pgtestDSN returns the connection string of a fresh database.
func pgtestDSN(t testing.TB) string {
	t.Helper()
	return pgtest.New(t).NewDatabase(t)
}

// createSequence creates the token sequence in cfg's database.
func createSequence(t testing.TB, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		return err
	}
	defer conn.Close(t.Context())
	return pgadvisory.CreateSequence(t.Context(), conn)
}

// database returns the config of a fresh database with the token
// sequence, and a pool on it for the test's own statements.
func database(t *testing.T) (*pgx.ConnConfig, *pgxpool.Pool) {
	t.Helper()
	dsn := pgtest.New(t).NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgadvisory.CreateSequence(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	return cfg, pool
}

// lockKey returns an advisory lock key no other test uses.
func lockKey() int64 { return rand.Int64() }

// acquire takes key, failing t otherwise; the lock is released when t
// ends.
func acquire(t *testing.T, cfg *pgx.ConnConfig, key int64, opts ...pgadvisory.Option) *pgadvisory.Lock {
	t.Helper()
	l, err := pgadvisory.Acquire(t.Context(), cfg, key, opts...)
	if err != nil {
		t.Fatalf("Acquire(%d): got %v, want nil", key, err)
	}
	t.Cleanup(func() { _ = l.Release(context.WithoutCancel(t.Context())) })
	return l
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
