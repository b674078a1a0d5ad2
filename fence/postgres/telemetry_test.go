package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/oteltest"
	"github.com/fencelock/fencelock/internal/pgtest"
)

// Every fenced write of a Table, a Fences and a Store given providers is
// counted on them by operation and outcome and traced as a child of the
// caller's span, with its token.
func TestTelemetry(t *testing.T) {
	sdk := oteltest.New(t)
	providers := []postgres.Option{postgres.WithMeterProvider(sdk.Meters), postgres.WithTracerProvider(sdk.Tracers)}
	pool := pgtest.NewPool(t)
	mustExec(t, pool, "CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)")
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"), providers[0], providers[1])
	if err != nil {
		t.Fatal(err)
	}
	fences, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable}, providers...)
	if err != nil {
		t.Fatal(err)
	}
	store, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable}, providers...)
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.CreateSchema(t.Context(), pool); err != nil {
		t.Fatal(err)
	}

	ctx, parent := sdk.Tracers.Tracer("test").Start(t.Context(), "caller")
	mustExec(t, pool, "INSERT INTO accounts (id) VALUES ($1)", "acct-1")
	if err := accounts.Update(ctx, pool, "acct-1", 5, postgres.Set("balance", 10)); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := accounts.Update(t.Context(), pool, "acct-1", 4, postgres.Set("balance", 11)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Update: got %v, want ErrStale", err)
	}
	if err := fences.RunInTx(t.Context(), pool, "acct-1", 5, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err = fences.RunInTx(t.Context(), pool, "acct-1", 3, func(pgx.Tx) error { return nil })
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale RunInTx: got %v, want ErrStale", err)
	}
	if err := store.Put(t.Context(), "k", 7, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(t.Context(), "k", 6); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Delete: got %v, want ErrStale", err)
	}
	// The package-level RunInTx reports to the global providers, not these.
	if err := postgres.RunInTx(t.Context(), pool, "acct-1", 9, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		op, outcome string
		want        int64
	}{
		{"update", "accepted", 1}, {"update", "stale", 1}, {"tx", "accepted", 1}, {"tx", "stale", 1},
		{"put", "accepted", 1}, {"delete", "stale", 1},
	} {
		got := sdk.Sum(t, "fencelock.writes", attribute.String("fencelock.adapter", "postgres"),
			attribute.String("fencelock.operation", c.op), attribute.String("fencelock.outcome", c.outcome))
		if got != c.want {
			t.Errorf("fencelock.writes %s %s: got %d, want %d", c.op, c.outcome, got, c.want)
		}
	}
	if got := sdk.Sum(t, "fencelock.write.duration", attribute.String("fencelock.operation", "update")); got != 2 {
		t.Errorf("fencelock.write.duration of updates: got %d, want 2", got)
	}
	first := sdk.Span(t, "postgres.update")
	if first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("postgres.update span %v: want a child of the caller's span", first)
	}
	for key, want := range map[string]attribute.Value{
		"fencelock.token":    attribute.Int64Value(5),
		"fencelock.resource": attribute.StringValue("accounts/acct-1"),
		"fencelock.outcome":  attribute.StringValue("accepted"),
	} {
		if got, _ := oteltest.Attr(first, key); got != want {
			t.Errorf("postgres.update span's %s: got %v, want %v", key, got.String(), want.String())
		}
	}
}

// A nil Option or provider fails NewFences and NewStore as it fails
// NewTable (TestNewTableInvalid), before any I/O.
func TestTelemetryOptionsRejected(t *testing.T) {
	tests := []struct {
		name string
		opt  postgres.Option
	}{
		{"nil option", nil},
		{"nil meter provider", postgres.WithMeterProvider(nil)},
		{"nil tracer provider", postgres.WithTracerProvider(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f, err := postgres.NewFences(pgx.Identifier{"f"}, tt.opt); f != nil || !errors.Is(err, postgres.ErrInvalidOption) {
				t.Errorf("NewFences: got (%v, %v), want (nil, an error matching postgres.ErrInvalidOption)", f, err)
			}
			if s, err := postgres.NewStore(noIO{t}, pgx.Identifier{"s"}, tt.opt); s != nil || !errors.Is(err, postgres.ErrInvalidOption) {
				t.Errorf("NewStore: got (%v, %v), want (nil, an error matching postgres.ErrInvalidOption)", s, err)
			}
		})
	}
}
