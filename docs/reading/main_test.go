package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// TestReadingPrograms runs docs/reading.md's examples as the page says to,
// the program's run with its example's name, against embedded etcd and a
// fresh database holding schema.sql, and checks what each wrote.
func TestReadingPrograms(t *testing.T) {
	etcd := embedetcd.NewServer(t)
	t.Setenv("ETCDCTL_ENDPOINTS", strings.Join(etcd.Endpoints(), ","))
	for _, tc := range []struct {
		name  string
		runs  int
		check func(t *testing.T, pool *pgxpool.Pool, store *etcdfence.Store)
	}{
		{name: "held", runs: 2, check: func(t *testing.T, pool *pgxpool.Pool, _ *etcdfence.Store) {
			wantBalances(t, pool, 800, 1200)
		}},
		{name: "claimed", runs: 2, check: func(t *testing.T, pool *pgxpool.Pool, _ *etcdfence.Store) {
			wantBalances(t, pool, 800, 1200)
			var fa, fb int64
			if err := pool.QueryRow(t.Context(), "SELECT (SELECT fence FROM accounts WHERE id = 'acct-A'), (SELECT fence FROM accounts WHERE id = 'acct-B')").Scan(&fa, &fb); err != nil {
				t.Fatal(err)
			}
			if fa <= 0 || fb <= 0 || fa == fb {
				t.Errorf("fence columns: got %d and %d, want each account's own lock's token", fa, fb)
			}
		}},
		{name: "kv", runs: 2, check: func(t *testing.T, _ *pgxpool.Pool, store *etcdfence.Store) {
			wantValue(t, store, "acct-A", "800")
			wantValue(t, store, "acct-B", "1200")
		}},
		{name: "counter", runs: 3, check: func(t *testing.T, _ *pgxpool.Pool, store *etcdfence.Store) {
			wantValue(t, store, "invoices-sent", "3")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newSchemaPool(t)
			cli := newEtcdClient(t, etcd.Endpoints())
			store, err := etcdfence.New(cli, "/reading/")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Delete(t.Context(), "/reading/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			for range tc.runs {
				if err := run(t.Context(), tc.name); err != nil {
					t.Fatalf("run %s: got error %v, want nil", tc.name, err)
				}
			}
			tc.check(t, pool, store)
		})
	}
}

// TestReadingInsufficientFunds runs each transfer from an account holding
// less than 100: errInsufficientFunds, and nothing written.
func TestReadingInsufficientFunds(t *testing.T) {
	etcd := embedetcd.NewServer(t)
	cli := newEtcdClient(t, etcd.Endpoints())
	locks, err := etcdlock.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close(context.Background()) })
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		transfer func(context.Context, *pgxpool.Pool) error
	}{
		{name: "held", transfer: func(ctx context.Context, pool *pgxpool.Pool) error {
			if err := postgres.CreateSchema(ctx, pool); err != nil {
				return err
			}
			return transfer(ctx, locks, pool)
		}},
		{name: "claimed", transfer: func(ctx context.Context, pool *pgxpool.Pool) error {
			return transferClaimed(ctx, locks, pool, accounts)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newSchemaPool(t)
			if _, err := pool.Exec(t.Context(), "UPDATE accounts SET balance = 50 WHERE id = 'acct-A'"); err != nil {
				t.Fatal(err)
			}
			if err := tc.transfer(t.Context(), pool); !errors.Is(err, errInsufficientFunds) {
				t.Fatalf("got %v, want errInsufficientFunds", err)
			}
			wantBalances(t, pool, 50, 1000)
		})
	}
	t.Run("kv", func(t *testing.T) {
		store, err := etcdfence.New(cli, "/reading-poor/")
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(t.Context(), "acct-A", 1, []byte("50")); err != nil {
			t.Fatal(err)
		}
		if err := transferKV(t.Context(), locks, store); !errors.Is(err, errInsufficientFunds) {
			t.Fatalf("got %v, want errInsufficientFunds", err)
		}
		wantValue(t, store, "acct-A", "50")
		if _, err := store.Get(t.Context(), "acct-B"); !errors.Is(err, fence.ErrNotFound) {
			t.Errorf("acct-B: got %v, want fence.ErrNotFound (nothing written)", err)
		}
	})
}

// TestReadingUsage checks that a name the program does not know is an
// error that lists the examples, before any connection is made.
func TestReadingUsage(t *testing.T) {
	err := run(t.Context(), "nope")
	if err == nil || !strings.Contains(err.Error(), "held, claimed, kv or counter") {
		t.Fatalf("run nope: got %v, want an error listing the examples", err)
	}
}

// newSchemaPool returns a fresh database holding schema.sql, the database
// run reads from DATABASE_URL.
func newSchemaPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), string(schema)); err != nil {
		t.Fatalf("schema.sql: got error %v, want nil", err)
	}
	t.Setenv("DATABASE_URL", pool.Config().ConnString())
	return pool
}

func newEtcdClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func wantBalances(t *testing.T, pool *pgxpool.Pool, a, b int64) {
	t.Helper()
	var gotA, gotB int64
	if err := pool.QueryRow(t.Context(), "SELECT (SELECT balance FROM accounts WHERE id = 'acct-A'), (SELECT balance FROM accounts WHERE id = 'acct-B')").Scan(&gotA, &gotB); err != nil {
		t.Fatal(err)
	}
	if gotA != a || gotB != b {
		t.Errorf("balances: got acct-A %d, acct-B %d; want %d and %d", gotA, gotB, a, b)
	}
}

func wantValue(t *testing.T, store *etcdfence.Store, key, want string) {
	t.Helper()
	rec, err := store.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	if string(rec.Value) != want {
		t.Errorf("%s: got %q, want %q", key, rec.Value, want)
	}
}
