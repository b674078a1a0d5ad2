package azblobfence_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	s := newStore(t, azblobfence.WithPrefix(prefix(t)), azblobfence.WithMeterProvider(otel.Meters), azblobfence.WithTracerProvider(otel.Tracers))
	ctx, parent := otel.Tracers.Tracer("test").Start(t.Context(), "caller")
	if err := s.Put(ctx, "k", 5, []byte("v5")); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := s.Put(t.Context(), "k", 3, []byte("v3")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(3) after 5: got %v", err)
	}
	if err := s.Delete(t.Context(), "k", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), "new", 5); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate of a key with no value: got %v", err)
	}
	if err := s.Update(t.Context(), "k", 7, func(fence.Record) ([]byte, error) { return []byte("u"), nil }); err != nil {
		t.Fatal(err)
	}
	op := func(name string) attribute.KeyValue { return attribute.String("fencelock.operation", name) }
	outcome := func(name string) attribute.KeyValue { return attribute.String("fencelock.outcome", name) }
	adapter := attribute.String("fencelock.adapter", "azblob")
	for _, tt := range []struct {
		want int64
		attr []attribute.KeyValue
	}{
		{1, []attribute.KeyValue{adapter, op("put"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("put"), outcome("stale")}},
		{1, []attribute.KeyValue{adapter, op("delete"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("get_for_update"), outcome("accepted")}},
		{1, []attribute.KeyValue{adapter, op("update"), outcome("accepted")}},
	} {
		if got := otel.Sum(t, "fencelock.writes", tt.attr...); got != tt.want {
			t.Errorf("fencelock.writes %v: got %d, want %d", tt.attr, got, tt.want)
		}
	}
	first := otel.Span(t, "azblob.put")
	if first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("azblob.put span: %v, want a child of the caller's", first)
	}
}
