package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// The package reports to the global OpenTelemetry providers: every fenced
// write is counted by operation and outcome and traced as a child of the
// caller's span, with its token.
func TestTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { mp.Shutdown(context.Background()); tp.Shutdown(context.Background()) })

	pool, accounts := newAccounts(t)
	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
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

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "fencelock.writes" {
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value(attribute.Key("fencelock.operation"))
					o, _ := p.Attributes.Value(attribute.Key("fencelock.outcome"))
					got[[2]string{op.AsString(), o.AsString()}] += p.Value
				}
			}
		}
	}
	for k, want := range map[[2]string]int64{{"update", "accepted"}: 1, {"update", "stale"}: 1, {"tx", "stale"}: 1} {
		if got[k] < want {
			t.Errorf("fencelock.writes %v: got %d, want %d (all: %v)", k, got[k], want, got)
		}
	}
	var first sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "postgres.update" {
			first = s
			break
		}
	}
	if first == nil || first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("postgres.update span %v: want a child of the caller's span", first)
	}
}
