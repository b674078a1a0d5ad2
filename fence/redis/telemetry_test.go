package redisfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token and key.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	opts := []redisfence.Option{redisfence.WithMeterProvider(otel.Meters), redisfence.WithTracerProvider(otel.Tracers)}
	c := client(t)
	s := mustNew(t, c, prefix(t), opts...)
	h, err := redisfence.NewHash(c, "fence", opts...)
	if err != nil {
		t.Fatal(err)
	}
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
	_ = s.Put(cancelled, "k", 6, nil) // refused before any I/O: not counted
	if err := s.Delete(t.Context(), "k", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), "new", 5); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GetForUpdate of a key with no value: got %v", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.Update(t.Context(), "k", 7, func(fence.Record) ([]byte, error) { panic("fn panics") })
	}()
	hk := prefix(t) + "h"
	if err := h.Set(t.Context(), hk, 5, map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetForUpdate(t.Context(), hk, 4, "a"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Hash.GetForUpdate(4) after 5: got %v", err)
	}
	if err := h.Update(t.Context(), hk, 5, []string{"a"}, func(m map[string]string) (map[string]string, error) { return m, nil }); err != nil {
		t.Fatal(err)
	}
	otel.WantWrites(t, "redis", oteltest.StoreWrites[:4]...)
	otel.WantWrites(t, "redis", oteltest.Write{Op: "update", Outcome: "error"},
		oteltest.Write{Op: "hash_set", Outcome: "accepted"},
		oteltest.Write{Op: "hash_get_for_update", Outcome: "stale"},
		oteltest.Write{Op: "hash_update", Outcome: "accepted"})
	otel.WantPutSpan(t, "redis", parent.SpanContext())
	first := otel.Span(t, "redis.put")
	if res, _ := oteltest.Attr(first, "fencelock.resource"); res.AsString() != "k" {
		t.Fatalf("redis.put span's resource: got %v, want k", res)
	}
}
