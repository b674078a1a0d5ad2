package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// instrumented returns an in-memory SDK and an accounts Table, the default
// Fences and a Store on db, all reporting to it.
func instrumented(t *testing.T, db postgres.DB) (*oteltest.SDK, *postgres.Table, *postgres.Fences, *postgres.Store) {
	t.Helper()
	sdk := oteltest.New(t)
	providers := []postgres.Option{postgres.WithMeterProvider(sdk.Meters), postgres.WithTracerProvider(sdk.Tracers)}
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"), providers[0], providers[1])
	if err != nil {
		t.Fatal(err)
	}
	fences, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable}, providers...)
	if err != nil {
		t.Fatal(err)
	}
	store, err := postgres.NewStore(db, pgx.Identifier{postgres.DefaultStoreTable}, providers[0], providers[1])
	if err != nil {
		t.Fatal(err)
	}
	return sdk, accounts, fences, store
}

// Every fenced write of a Table, a Fences and a Store given providers is
// counted on them by operation and outcome and traced as a child of the
// caller's span, with its token.
func TestTelemetry(t *testing.T) {
	pool := pgtest.NewPool(t)
	mustExec(t, pool, "CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)")
	sdk, accounts, fences, store := instrumented(t, pool)
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
	err := fences.RunInTx(t.Context(), pool, "acct-1", 3, func(pgx.Tx) error { return nil })
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale RunInTx: got %v, want ErrStale", err)
	}
	if err := store.Put(t.Context(), "k", 7, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(t.Context(), "k", 6); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Delete: got %v, want ErrStale", err)
	}
	const credit = "UPDATE accounts SET balance = balance + 1 WHERE id = 'acct-1'"
	if n, err := fences.Exec(t.Context(), pool, "acct-1", 6, credit); err != nil || n != 1 {
		t.Fatalf("Exec: got (%d, %v), want (1, nil)", n, err)
	}
	if _, err := fences.Exec(t.Context(), pool, "acct-1", 4, credit); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Exec: got %v, want ErrStale", err)
	}
	// The package-level RunInTx and Exec report to the global providers,
	// not these.
	if err := postgres.RunInTx(t.Context(), pool, "acct-1", 9, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Exec(t.Context(), pool, "acct-1", 9, credit); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		op, outcome string
		want        int64
	}{
		{"update", "accepted", 1}, {"update", "stale", 1}, {"tx", "accepted", 1}, {"tx", "stale", 1},
		{"exec", "accepted", 1}, {"exec", "stale", 1}, {"put", "accepted", 1}, {"delete", "stale", 1},
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
	execs := sdk.Spans(t, "postgres.exec")
	if len(execs) != 2 {
		t.Fatalf("postgres.exec spans: got %d, want 2 (the package-level Exec reports elsewhere)", len(execs))
	}
	for key, want := range map[string]attribute.Value{
		"fencelock.token":    attribute.Int64Value(4),
		"fencelock.resource": attribute.StringValue("acct-1"),
		"fencelock.outcome":  attribute.StringValue("stale"),
	} {
		if got, _ := oteltest.Attr(execs[1], key); got != want {
			t.Errorf("stale postgres.exec span's %s: got %v, want %v", key, got.String(), want.String())
		}
	}
}

// A write refused for its arguments, before any I/O, is neither counted
// nor traced; a write that fails after the checks is, as an error (the
// control).
func TestTelemetryInvalidInput(t *testing.T) {
	sdk, accounts, fences, store := instrumented(t, noIO{t})
	ok := func(pgx.Tx) error { return nil }
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Update, empty key", func() error { return accounts.Update(t.Context(), noIO{t}, "", 1) }, fence.ErrInvalidKey},
		{"Update, zero token", func() error { return accounts.Update(t.Context(), noIO{t}, "k", 0) }, fence.ErrInvalidToken},
		{"Update, nil DB", func() error { return accounts.Update(t.Context(), nil, "k", 1) }, postgres.ErrInvalidArgument},
		{"Update, column twice", func() error {
			return accounts.Update(t.Context(), noIO{t}, "k", 1, postgres.Set("a", 1), postgres.Set("a", 2))
		}, postgres.ErrInvalidArgument},
		{"Upsert, key column assigned", func() error {
			return accounts.Upsert(t.Context(), noIO{t}, "k", 1, postgres.Set("id", "x"))
		}, postgres.ErrInvalidArgument},
		{"Upsert, empty column", func() error { return accounts.Upsert(t.Context(), noIO{t}, "k", 1, postgres.Set("", 1)) }, postgres.ErrInvalidIdentifier},
		{"RunInTx, empty resource", func() error { return fences.RunInTx(t.Context(), noIO{t}, "", 1, ok) }, fence.ErrInvalidKey},
		{"RunInTx, options on a handle without BeginTx", func() error {
			return fences.RunInTx(t.Context(), noIO{t}, "r", 1, ok, postgres.WithIsolation(pgx.Serializable))
		}, postgres.ErrInvalidOption},
		{"Exec, zero token", func() error { _, err := fences.Exec(t.Context(), noIO{t}, "r", 0, "DELETE FROM t"); return err }, fence.ErrInvalidToken},
		{"Exec, SELECT", func() error { _, err := fences.Exec(t.Context(), noIO{t}, "r", 1, "SELECT 1"); return err }, postgres.ErrInvalidArgument},
		{"Exec, no SendBatch", func() error { _, err := fences.Exec(t.Context(), noIO{t}, "r", 1, "DELETE FROM t"); return err }, postgres.ErrInvalidArgument},
		{"Put, empty key", func() error { return store.Put(t.Context(), "", 1, []byte("v")) }, fence.ErrInvalidKey},
		{"Delete, zero token", func() error { return store.Delete(t.Context(), "k", 0) }, fence.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error matching %v", err, tt.want)
			}
		})
	}
	if got := sdk.Sum(t, "fencelock.writes"); got != 0 {
		t.Errorf("fencelock.writes after refused arguments: got %d, want 0", got)
	}
	if got := sdk.Sum(t, "fencelock.write.duration"); got != 0 {
		t.Errorf("fencelock.write.duration after refused arguments: got %d, want 0", got)
	}
	for _, name := range []string{"postgres.update", "postgres.upsert", "postgres.tx", "postgres.exec", "postgres.put", "postgres.delete"} {
		if got := len(sdk.Spans(t, name)); got != 0 {
			t.Errorf("%s spans after refused arguments: got %d, want 0", name, got)
		}
	}

	// The control: the same Update, with valid arguments, fails on the
	// server and is counted as an error.
	pool := pgtest.NewPool(t)
	if err := accounts.Update(t.Context(), pool, "k", 1, postgres.Set("balance", 1)); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("Update of a missing table: got %v, want an error matching postgres.ErrSchema", err)
	}
	got := sdk.Sum(t, "fencelock.writes", attribute.String("fencelock.operation", "update"), attribute.String("fencelock.outcome", "error"))
	if got != 1 {
		t.Errorf("fencelock.writes update error (the control): got %d, want 1", got)
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

// A meter provider that fails to create an instrument fails the
// constructors, with its error.
func TestTelemetryInstrumentError(t *testing.T) {
	opt := postgres.WithMeterProvider(refusingMeters{})
	if tbl, err := postgres.NewTable(pgx.Identifier{"t"}, opt); tbl != nil || !errors.Is(err, errRefused) {
		t.Errorf("NewTable: got (%v, %v), want (nil, an error matching %v)", tbl, err, errRefused)
	}
	if f, err := postgres.NewFences(pgx.Identifier{"f"}, opt); f != nil || !errors.Is(err, errRefused) {
		t.Errorf("NewFences: got (%v, %v), want (nil, an error matching %v)", f, err, errRefused)
	}
	if s, err := postgres.NewStore(noIO{t}, pgx.Identifier{"s"}, opt); s != nil || !errors.Is(err, errRefused) {
		t.Errorf("NewStore: got (%v, %v), want (nil, an error matching %v)", s, err, errRefused)
	}
}

var errRefused = errors.New("instrument refused")

// refusingMeters gives meters whose counters come with errRefused.
type refusingMeters struct{ noop.MeterProvider }

func (refusingMeters) Meter(string, ...metric.MeterOption) metric.Meter { return refusingMeter{} }

type refusingMeter struct{ noop.Meter }

func (refusingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return noop.Int64Counter{}, errRefused
}
