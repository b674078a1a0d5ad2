package jsfence_test

import (
	"testing"

	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	s := newStore(t, jsfence.WithMeterProvider(otel.Meters), jsfence.WithTracerProvider(otel.Tracers))
	parent := otel.StoreWrites(t, s, "")
	otel.WantWrites(t, "jetstream", oteltest.StoreWrites...)
	otel.WantPutSpan(t, "jetstream", parent)
}
