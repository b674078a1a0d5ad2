package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// TestQuickstart runs the README's Quickstart program against embedded etcd
// and a fresh database holding schema.sql: the balance is set under the
// lock's token, and a write with an older token is then refused (the
// control: the row is fenced).
func TestQuickstart(t *testing.T) {
	pool := pgtest.NewPool(t)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), string(schema)); err != nil {
		t.Fatalf("schema.sql: got error %v, want nil", err)
	}
	t.Setenv("ETCDCTL_ENDPOINTS", strings.Join(embedetcd.NewServer(t).Endpoints(), ","))
	t.Setenv("DATABASE_URL", pool.Config().ConnString())

	if err := run(t.Context()); err != nil {
		t.Fatalf("run: got error %v, want nil", err)
	}
	var balance, token int64
	if err := pool.QueryRow(t.Context(), "SELECT balance, fence FROM accounts WHERE id = 'acct-7'").Scan(&balance, &token); err != nil {
		t.Fatal(err)
	}
	if balance != 120 || token <= 0 {
		t.Fatalf("acct-7: got balance %d fence %d, want balance 120 and a positive fence", balance, token)
	}

	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	err = accounts.Update(t.Context(), pool, "acct-7", fence.Token(token-1), postgres.Set("balance", 90))
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write with token %d after %d: got %v, want fence.ErrStale", token-1, token, err)
	}
}
