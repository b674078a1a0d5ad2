package tel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fencelock/fencelock/internal/tel"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// While no SDK is set, a Tracer on the global provider starts no span and
// hands back the caller's context; once one is set, its next span is the
// SDK's. (It leaves a no-op global provider behind: the global one cannot
// be unset.)
func TestTracerNoSpanUntilSDKSet(t *testing.T) {
	tr := tel.NewTracer(otel.GetTracerProvider(), "test")
	ctx := context.Background()
	got, span := tr.Start(ctx, "before")
	if got != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatalf("with no SDK set: a new context (%v) or a live span (recording %v, valid %v)",
			got != ctx, span.IsRecording(), span.SpanContext().IsValid())
	}
	span.End()
	sdk := oteltest.New(t)
	otel.SetTracerProvider(sdk.Tracers)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	_, span = tr.Start(ctx, "after")
	if !span.IsRecording() {
		t.Fatal("after the SDK was set: the span does not record")
	}
	span.End()
	sdk.Span(t, "after")
	if n := len(sdk.Spans(t, "before")); n != 0 {
		t.Fatalf("%d spans before the SDK was set, want 0", n)
	}
}
