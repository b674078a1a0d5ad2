package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// TestEffects runs docs/effects.md's program against embedded etcd and a
// fresh database holding schema.sql: order-42 is paid, the stale holder's
// payment is refused, and the mail service applies exactly one email, the
// paying holder's.
func TestEffects(t *testing.T) {
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
	sent, err := run(t.Context())
	if err != nil {
		t.Fatalf("run: got error %v, want nil", err)
	}
	if len(sent) != 1 || !strings.Contains(sent[0], "order-42") {
		t.Fatalf("emails applied: got %q, want one, for order-42", sent)
	}
	var status string
	var pending int
	if err := pool.QueryRow(t.Context(), "SELECT status, (SELECT count(*) FROM fencelock_outbox WHERE settled_at IS NULL) FROM orders WHERE id = 'order-42'").Scan(&status, &pending); err != nil {
		t.Fatal(err)
	}
	if status != "paid" || pending != 0 {
		t.Fatalf("order-42 %s with %d effects pending, want paid with none", status, pending)
	}
}
