package postgres_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// countingConn counts the writes a client makes on a connection: each
// round trip to the server starts with one (pgx writes a statement, or a
// batch, with its Sync in one write).
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

// countingPool returns a pool of one connection on the database dsn, and
// the count of its round trips.
func countingPool(t *testing.T, dsn string) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, n}, nil
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, n
}

// roundTrips runs op twice (the first prepares its statements), and
// returns the round trips of the second.
func roundTrips(t *testing.T, n *atomic.Int64, op func() error) int64 {
	t.Helper()
	if err := op(); err != nil {
		t.Fatal(err)
	}
	before := n.Load()
	if err := op(); err != nil {
		t.Fatal(err)
	}
	return n.Load() - before
}

// TestRoundTrips counts the round trips of each form the benchmarks
// time, against its unfenced twin, so that one more cannot slip in
// unseen: a fenced read in autocommit of a row claimed already is the one
// of a plain SELECT, and the first claim one more; a fenced transfer
// takes one more than the plain transaction (its fence claims).
func TestRoundTrips(t *testing.T) {
	pool, n := countingPool(t, pgtest.New(t).NewDatabase(t))
	ctx := t.Context()
	for _, sql := range []string{
		"CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)",
		"INSERT INTO accounts (id, balance) VALUES ('a', 0), ('b', 0), ('c', 0)",
	} {
		mustExec(t, pool, sql)
	}
	if err := postgres.CreateSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	claims, plain, safe := transferForms(ctx, tbl)
	var bal int64
	first := fence.Token(1)
	for _, c := range []struct {
		name string
		op   func() error
		want int64
	}{
		{"SELECT", func() error {
			return pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", "a").Scan(&bal)
		}, 1},
		{"GetForUpdate, claimed already", func() error { return tbl.GetForUpdate(ctx, pool, "a", 1, []string{"balance"}, &bal) }, 1},
		{"GetForUpdate, a first claim", func() error {
			first++
			return tbl.GetForUpdate(ctx, pool, "c", first, []string{"balance"}, &bal)
		}, 2},
		{"transfer, plain", func() error { return pgx.BeginFunc(ctx, pool, plain) }, 5},
		{"transfer, RunInTxAll", func() error { return postgres.RunInTxAll(ctx, pool, claims, plain) }, 6},
		{"transfer, RunInTxAll, GetForUpdate and Update", func() error { return postgres.RunInTxAll(ctx, pool, claims, safe) }, 6},
	} {
		if got := roundTrips(t, n, c.op); got != c.want {
			t.Errorf("%s: got %d round trips, want %d", c.name, got, c.want)
		}
	}
}
