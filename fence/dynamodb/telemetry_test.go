package dynamofence_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token and key.
func TestTelemetry(t *testing.T) {
	needTransactions(t)
	otel := oteltest.New(t)
	opts := []dynamofence.Option{dynamofence.WithMeterProvider(otel.Meters), dynamofence.WithTracerProvider(otel.Tracers)}
	c := client(t)
	s := mustNew(t, c, opts...)
	accounts(t, c) // the table
	tb, err := dynamofence.NewTable(c, accountsTable, "fence", opts...)
	if err != nil {
		t.Fatal(err)
	}
	k := prefix(t) + "k"
	ctx, parent := otel.Tracers.Tracer("test").Start(t.Context(), "caller")
	if err := s.Put(ctx, k, 5, []byte("v5")); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := s.Put(t.Context(), k, 3, []byte("v3")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(3) after 5: got %v", err)
	}
	if err := s.Delete(t.Context(), k, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), prefix(t)+"new", 5); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate of a key with no value: got %v", err)
	}
	if err := s.Update(t.Context(), k, 7, func(fence.Record) ([]byte, error) { return []byte("u"), nil }); err != nil {
		t.Fatal(err)
	}
	a, b := account(t, 1), account(t, 2)
	if err := tb.Update(t.Context(), a, 5, setBalance(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.GetForUpdate(t.Context(), a, 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Table.GetForUpdate(4) after 5: got %v", err)
	}
	if err := dynamofence.Transact(t.Context(),
		dynamofence.TxWrite{Table: tb, Key: a, Token: 5, Update: expression.Add(expression.Name("balance"), expression.Value(-1))},
		dynamofence.TxWrite{Table: tb, Key: b, Token: 6, Update: expression.Add(expression.Name("balance"), expression.Value(1))},
	); err != nil {
		t.Fatal(err)
	}
	op := func(name string) attribute.KeyValue { return attribute.String("fencelock.operation", name) }
	outcome := func(name string) attribute.KeyValue { return attribute.String("fencelock.outcome", name) }
	adapter := attribute.String("fencelock.adapter", "dynamodb")
	for _, tt := range []struct {
		want int64
		attr []attribute.KeyValue
	}{
		{1, []attribute.KeyValue{adapter, op("put"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("put"), outcome("stale")}},
		{1, []attribute.KeyValue{adapter, op("delete"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("get_for_update"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("update"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("table_update"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("table_get_for_update"), outcome("stale")}},
		{1, []attribute.KeyValue{adapter, op("transact"), outcome("accepted")}},
	} {
		if got := otel.Sum(t, "fencelock.writes", tt.attr...); got != tt.want {
			t.Errorf("fencelock.writes %v: got %d, want %d", tt.attr, got, tt.want)
		}
	}
	first := otel.Span(t, "dynamodb.put")
	if first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("dynamodb.put span: %v, want a child of the caller's", first)
	}
	if tok, _ := oteltest.Attr(first, "fencelock.token"); tok.AsInt64() != 5 {
		t.Fatalf("dynamodb.put span's token: got %v, want 5", tok)
	}
}
