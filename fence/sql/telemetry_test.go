package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every fenced write is counted by operation and outcome and traced as a
// child of the caller's span, with its token and resource; a write refused
// for its arguments is not counted; a busy rollback is counted as
// retryable. (The instruments are dialect-independent: SQLite, in the
// process, is enough.)
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	srv := server{"SQLite", sqlfence.SQLite, openSQLite}
	opts := []sqlfence.Option{sqlfence.WithMeterProvider(otel.Meters), sqlfence.WithTracerProvider(otel.Tracers)}
	db, tbl := newAccounts(t, srv, sqlfence.WithMeterProvider(otel.Meters), sqlfence.WithTracerProvider(otel.Tracers))
	ctx := t.Context()

	callerCtx, caller := otel.Tracers.Tracer("test").Start(ctx, "caller")
	if err := tbl.Upsert(callerCtx, db, "a", 5, sqlfence.Set("balance", 5)); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if err := tbl.Update(ctx, db, "a", 6, sqlfence.Set("balance", 6)); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Update(ctx, db, "a", 4, sqlfence.Set("balance", 4)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update(4) after 6: got %v, want ErrStale", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_ = tbl.Update(cancelled, db, "a", 7, sqlfence.Set("balance", 7)) // refused before any I/O: not counted
	_ = tbl.Update(ctx, db, "a", 0)                                   // refused before any I/O: not counted

	fences, err := sqlfence.NewFences(sqlfence.SQLite, sqlfence.Identifier{sqlfence.DefaultFenceTable}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := fences.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	body := func(tx *sql.Tx) error { return nil }
	if err := fences.RunInTx(ctx, db, "r", 9, body); err != nil {
		t.Fatal(err)
	}
	if err := fences.RunInTx(ctx, db, "r", 8, body); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("RunInTx(8) after 9: got %v, want ErrStale", err)
	}
	if _, err := fences.Exec(ctx, db, "r", 9, "UPDATE accounts SET note = 'x'"); err != nil {
		t.Fatal(err)
	}
	_, store := newStore(t, srv, opts...)
	if err := store.Put(ctx, "k", 3, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "k", 2); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Delete(2) after 3: got %v, want ErrStale", err)
	}

	for _, tt := range []struct {
		op, outcome string
		want        int64
	}{
		{"upsert", "accepted", 1},
		{"update", "accepted", 1},
		{"update", "stale", 1},
		{"tx", "accepted", 1},
		{"tx", "stale", 1},
		{"exec", "accepted", 1},
		{"put", "accepted", 1},
		{"delete", "stale", 1},
	} {
		attrs := []attribute.KeyValue{attribute.String("fencelock.adapter", "sql"),
			attribute.String("fencelock.operation", tt.op), attribute.String("fencelock.outcome", tt.outcome)}
		if got := otel.Sum(t, "fencelock.writes", attrs...); got != tt.want {
			t.Errorf("fencelock.writes %s %s: got %d, want %d", tt.op, tt.outcome, got, tt.want)
		}
	}
	if got := otel.Sum(t, "fencelock.writes", attribute.String("fencelock.operation", "update")); got != 2 {
		t.Errorf("fencelock.writes of update: got %d, want 2 (the writes refused before any I/O are not counted)", got)
	}
	span := otel.Span(t, "sql.upsert")
	if span.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("sql.upsert span: parent %v, want the caller's span", span.Parent().SpanID())
	}
	if tok, _ := oteltest.Attr(span, "fencelock.token"); tok.AsInt64() != 5 {
		t.Errorf("sql.upsert span's token: got %v, want 5", tok)
	}
	if res, _ := oteltest.Attr(span, "fencelock.resource"); res.AsString() != "accounts/a" {
		t.Errorf("sql.upsert span's resource: got %q, want accounts/a", res.AsString())
	}

	// A write that finds another connection's write lock, with no
	// busy_timeout and no retry, is rolled back busy: counted retryable.
	busyTbl, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"),
		sqlfence.WithRetries(0), sqlfence.WithMeterProvider(otel.Meters))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExec(t, db, "PRAGMA busy_timeout = 0")
	lock, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, "UPDATE accounts SET note = 'held'"); err != nil {
		t.Fatal(err)
	}
	if err := busyTbl.Update(ctx, db, "a", 10, sqlfence.Set("balance", 10)); !errors.Is(err, sqlfence.ErrRetryable) {
		t.Fatalf("Update while another connection writes: got %v, want ErrRetryable", err)
	}
	if got := otel.Sum(t, "fencelock.sql.retryable_errors"); got != 1 {
		t.Errorf("fencelock.sql.retryable_errors: got %d, want 1", got)
	}

	for _, o := range []sqlfence.Option{sqlfence.WithMeterProvider(nil), sqlfence.WithTracerProvider(nil)} {
		if _, err := sqlfence.NewFences(sqlfence.SQLite, sqlfence.Identifier{"f"}, o); !errors.Is(err, sqlfence.ErrInvalidOption) {
			t.Errorf("NewFences with a nil provider: got %v, want ErrInvalidOption", err)
		}
	}
}
