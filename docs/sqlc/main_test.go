package sqlcbank_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/docs/sqlc/db"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// newBank returns a pool on a fresh database holding schema.sql.
func newBank(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), string(schema)); err != nil {
		t.Fatalf("schema.sql: got error %v, want nil", err)
	}
	return pool
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: got error %v, want nil", sql, err)
	}
}

// wantAccount fails t unless account id holds balance and fence.
func wantAccount(t *testing.T, pool *pgxpool.Pool, id string, balance, fence int64) {
	t.Helper()
	got, err := db.New(pool).GetAccount(t.Context(), id)
	if err != nil {
		t.Fatalf("account %s: %v", id, err)
	}
	if got.Balance != balance || got.Fence != fence {
		t.Fatalf("account %s: got balance %d fence %d, want balance %d fence %d", id, got.Balance, got.Fence, balance, fence)
	}
}

// noIO is a db.DBTX that fails the test on any call: what runs on it was
// to be refused before any I/O.
type noIO struct{ t *testing.T }

func (n noIO) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	n.t.Error("Exec called, want no I/O")
	return pgconn.CommandTag{}, nil
}

func (n noIO) Query(context.Context, string, ...any) (pgx.Rows, error) {
	n.t.Error("Query called, want no I/O")
	return nil, nil
}

func (n noIO) QueryRow(context.Context, string, ...any) pgx.Row {
	n.t.Error("QueryRow called, want no I/O")
	return nil
}

func (n noIO) Begin(context.Context) (pgx.Tx, error) {
	n.t.Error("Begin called, want no I/O")
	return nil, nil
}
