package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/oteltest"
)

// The package reports to the global OpenTelemetry providers: every fenced
// write is counted by operation and outcome and traced as a child of the
// caller's span, with its token.
func TestTelemetry(t *testing.T) {
	sdk := oteltest.New(t)
	otel.SetMeterProvider(sdk.Meters)
	otel.SetTracerProvider(sdk.Tracers)

	pool, accounts := newAccounts(t)
	ctx, parent := sdk.Tracers.Tracer("test").Start(t.Context(), "caller")
	mustExec(t, pool, "INSERT INTO accounts (id) VALUES ($1)", "acct-1")
	if err := accounts.Update(ctx, pool, "acct-1", 5, postgres.Set("balance", 10)); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := accounts.Update(t.Context(), pool, "acct-1", 4, postgres.Set("balance", 11)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Update: got %v, want ErrStale", err)
	}
	if err := postgres.CreateSchema(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	if err := postgres.RunInTx(t.Context(), pool, "acct-1", 5, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err := postgres.RunInTx(t.Context(), pool, "acct-1", 3, func(pgx.Tx) error { return nil })
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale RunInTx: got %v, want ErrStale", err)
	}

	for _, c := range []struct {
		op, outcome string
		want        int64
	}{{"update", "accepted", 1}, {"update", "stale", 1}, {"tx", "stale", 1}} {
		got := sdk.Sum(t, "fencelock.writes", attribute.String("fencelock.operation", c.op), attribute.String("fencelock.outcome", c.outcome))
		if got < c.want {
			t.Errorf("fencelock.writes %s %s: got %d, want %d", c.op, c.outcome, got, c.want)
		}
	}
	if first := sdk.Span(t, "postgres.update"); first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("postgres.update span %v: want a child of the caller's span", first)
	}
}
