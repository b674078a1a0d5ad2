package outbox_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

func TestDispatcherTelemetry(t *testing.T) {
	sdk := oteltest.New(t)
	m := outbox.NewMemoryLog()
	mustRecord(t, m, effect("a", 5, 0), effect("a", 5, 1))
	mustRecord(t, m, effect("b", 6, 0))
	s := outbox.SenderFunc(func(_ context.Context, e outbox.Effect) error {
		if e.Resource == "b" {
			return outbox.Permanent(errors.New("400"))
		}
		return nil
	})
	stop, _ := start(t, newDispatcher(t, m, s, outbox.WithMeterProvider(sdk.Meters), outbox.WithTracerProvider(sdk.Tracers)), newHolder(100))
	waitPending(t, m, 0)
	stop()
	if got := sdk.Sum(t, "fencelock.outbox.effects", attribute.String("fencelock.outcome", "delivered")); got != 2 {
		t.Errorf("delivered: got %d, want 2", got)
	}
	if got := sdk.Sum(t, "fencelock.outbox.effects", attribute.String("fencelock.outcome", "parked")); got != 1 {
		t.Errorf("parked: got %d, want 1", got)
	}
	if spans := sdk.Spans(t, "outbox.send"); len(spans) != 3 {
		t.Errorf("outbox.send spans: got %d, want 3", len(spans))
	}
	sp := sdk.Span(t, "outbox.send")
	if v, ok := oteltest.Attr(sp, "fencelock.outbox.key"); !ok || v.AsString() == "" {
		t.Errorf("outbox.send span has no fencelock.outbox.key")
	}
}
