package harness

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A fenced run and its control share the database, and their workers, of
// the same names, name their transfers alike: the transfer log must take
// both runs' transfer w0.0/x1, each from its own run's account. Keyed by
// the id alone, the second failed with a unique violation, which the
// liveness check then read as a holder's lost write (seed 971519).
func TestTransferLogPerRun(t *testing.T) {
	testenv.Long(t, "starts PostgreSQL")
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.New(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, stmt := range fxSchema {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range []string{"fenced", "control"} {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return moveFx(ctx, tx, check.Transfer{ID: "w0.0/x1", From: run + "-k0", To: run + "-k1", Amount: 1})
		}); err != nil {
			t.Fatalf("%s run's transfer w0.0/x1: got %v, want nil", run, err)
		}
	}
}
