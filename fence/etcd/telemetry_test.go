package etcdfence_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token and key.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	s := mustNew(t, etcdClient(t), prefix(t), etcdfence.WithMeterProvider(otel.Meters), etcdfence.WithTracerProvider(otel.Tracers))
	ctx, parent := otel.Tracers.Tracer("test").Start(t.Context(), "caller")
	if err := s.Put(ctx, "k", 5, []byte("v5")); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := s.Put(t.Context(), "k", 3, []byte("v3")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(3) after 5: got %v", err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	s.Put(cancelled, "k", 6, nil) // refused before any I/O: not counted
	if err := s.Delete(t.Context(), "k", 7); err != nil {
		t.Fatal(err)
	}
	put := attribute.String("fencelock.operation", "put")
	for _, tt := range []struct {
		want int64
		attr []attribute.KeyValue
	}{
		{1, []attribute.KeyValue{put, attribute.String("fencelock.outcome", "accepted")}},
		{1, []attribute.KeyValue{put, attribute.String("fencelock.outcome", "stale")}},
		{1, []attribute.KeyValue{attribute.String("fencelock.operation", "delete"), attribute.String("fencelock.adapter", "etcd")}},
	} {
		if got := otel.Sum(t, "fencelock.writes", tt.attr...); got != tt.want {
			t.Errorf("fencelock.writes %v: got %d, want %d", tt.attr, got, tt.want)
		}
	}
	first := otel.Span(t, "etcd.put")
	if first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("etcd.put span: %v, want a child of the caller's", first)
	}
	if tok, _ := oteltest.Attr(first, "fencelock.token"); tok.AsInt64() != 5 {
		t.Fatalf("etcd.put span's token: got %v, want 5", tok)
	}
	if _, err := etcdfence.New(etcdClient(t), "p/", etcdfence.WithMeterProvider(nil)); !errors.Is(err, etcdfence.ErrInvalidOption) {
		t.Fatalf("New with a nil meter provider: got %v, want ErrInvalidOption", err)
	}
}

// GetForUpdate and Update are counted and traced as writes: a claim that
// finds no value is accepted, an Update whose fn panics is an error.
func TestTelemetryUpdate(t *testing.T) {
	otel := oteltest.New(t)
	s := mustNew(t, etcdClient(t), prefix(t), etcdfence.WithMeterProvider(otel.Meters), etcdfence.WithTracerProvider(otel.Tracers))
	if _, err := s.GetForUpdate(t.Context(), "k", 5); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate of a key with no value: got %v", err)
	}
	if err := s.Update(t.Context(), "k", 5, increment); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), "k", 4, increment); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update(4) after 5: got %v", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.Update(t.Context(), "k", 5, func(fence.Record) ([]byte, error) { panic("fn panics") })
	}()
	gfu, upd := attribute.String("fencelock.operation", "get_for_update"), attribute.String("fencelock.operation", "update")
	for _, tt := range []struct {
		want int64
		attr []attribute.KeyValue
	}{
		{1, []attribute.KeyValue{gfu, attribute.String("fencelock.outcome", "accepted")}},
		{1, []attribute.KeyValue{upd, attribute.String("fencelock.outcome", "accepted")}},
		{1, []attribute.KeyValue{upd, attribute.String("fencelock.outcome", "stale")}},
		{1, []attribute.KeyValue{upd, attribute.String("fencelock.outcome", "error")}},
	} {
		if got := otel.Sum(t, "fencelock.writes", tt.attr...); got != tt.want {
			t.Errorf("fencelock.writes %v: got %d, want %d", tt.attr, got, tt.want)
		}
	}
	if tok, _ := oteltest.Attr(otel.Span(t, "etcd.get_for_update"), "fencelock.token"); tok.AsInt64() != 5 {
		t.Fatalf("etcd.get_for_update span's token: got %v, want 5", tok)
	}
	if n := len(otel.Spans(t, "etcd.update")); n != 3 {
		t.Fatalf("etcd.update spans: got %d, want 3", n)
	}
}

// UpdateAll is counted and traced as one write, its span carrying the
// first claim's token and every key.
func TestTelemetryUpdateAll(t *testing.T) {
	otel := oteltest.New(t)
	s := mustNew(t, etcdClient(t), prefix(t), etcdfence.WithMeterProvider(otel.Meters), etcdfence.WithTracerProvider(otel.Tracers))
	mustPut(t, s, "a", 5, "100")
	mustPut(t, s, "b", 9, "100")
	if err := s.UpdateAll(t.Context(), both(5), transfer("a", "b", 10)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("UpdateAll(5) over b's 9: got %v", err)
	}
	if err := s.UpdateAll(t.Context(), both(9), transfer("a", "b", 10)); err != nil {
		t.Fatal(err)
	}
	op := attribute.String("fencelock.operation", "update_all")
	for _, tt := range []struct {
		want int64
		attr []attribute.KeyValue
	}{
		{1, []attribute.KeyValue{op, attribute.String("fencelock.outcome", "accepted")}},
		{1, []attribute.KeyValue{op, attribute.String("fencelock.outcome", "stale")}},
	} {
		if got := otel.Sum(t, "fencelock.writes", tt.attr...); got != tt.want {
			t.Errorf("fencelock.writes %v: got %d, want %d", tt.attr, got, tt.want)
		}
	}
	spans := otel.Spans(t, "etcd.update_all")
	if len(spans) != 2 {
		t.Fatalf("etcd.update_all spans: got %d, want 2", len(spans))
	}
	if tok, _ := oteltest.Attr(spans[1], "fencelock.token"); tok.AsInt64() != 9 {
		t.Fatalf("etcd.update_all span's token: got %v, want 9", tok)
	}
	if res, _ := oteltest.Attr(spans[1], "fencelock.resource"); res.AsString() != "a, b" {
		t.Fatalf("etcd.update_all span's resource: got %q, want %q", res.AsString(), "a, b")
	}
}
