package s3fence_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// Every fenced write is counted by outcome and traced as a child of the
// caller's span, with its token; refused conditional PUTs and the reads
// after them are counted.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket, s3fence.WithRetryDelay(0),
		s3fence.WithMeterProvider(otel.Meters), s3fence.WithTracerProvider(otel.Tracers))

	ctx, parent := otel.Tracers.Tracer("test").Start(t.Context(), "caller")
	if err := s.Put(ctx, "k", 5, []byte("v5")); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := s.Put(t.Context(), "k", 3, []byte("v3")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(3) after 5: got %v, want ErrStale", err)
	}
	f.mu.Lock()
	f.conflicts = 1
	f.mu.Unlock()
	if err := s.Put(t.Context(), "k", 6, []byte("v6")); err != nil {
		t.Fatalf("Put(6) through one 409: %v", err)
	}
	f.mu.Lock()
	f.lostRequests = 1
	f.mu.Unlock()
	if err := s.Put(t.Context(), "k", 7, []byte("v7")); !errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Put(7) whose request was lost: got %v, want ErrUnknownOutcome", err)
	}
	if err := s.Delete(t.Context(), "k", 8); err != nil {
		t.Fatal(err)
	}

	put := attribute.String("fencelock.operation", "put")
	for _, tt := range []struct {
		name string
		want int64
		attr []attribute.KeyValue
	}{
		{"fencelock.writes", 2, []attribute.KeyValue{put, attribute.String("fencelock.outcome", "accepted")}},
		{"fencelock.writes", 1, []attribute.KeyValue{put, attribute.String("fencelock.outcome", "stale")}},
		{"fencelock.writes", 1, []attribute.KeyValue{put, attribute.String("fencelock.outcome", "unknown")}},
		{"fencelock.writes", 1, []attribute.KeyValue{attribute.String("fencelock.operation", "delete")}},
		{"fencelock.write.duration", 5, []attribute.KeyValue{attribute.String("fencelock.adapter", "s3")}},
		{"fencelock.s3.conflicts", 1, nil},
		{"fencelock.s3.rereads", 1, nil},
	} {
		if got := otel.Sum(t, tt.name, tt.attr...); got != tt.want {
			t.Errorf("%s %v: got %d, want %d", tt.name, tt.attr, got, tt.want)
		}
	}
	first := otel.Span(t, "s3.put")
	if first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("first s3.put span: %v, want a child of the caller's span", first)
	}
	if tok, _ := oteltest.Attr(first, "fencelock.token"); tok.AsInt64() != 5 {
		t.Fatalf("s3.put span's token: got %v, want 5", tok)
	}
}
