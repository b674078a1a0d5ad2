package gcsfence_test

import (
	"testing"

	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	s := newStore(t, gcsfence.WithPrefix(fencewant.Prefix(t)), gcsfence.WithMeterProvider(otel.Meters), gcsfence.WithTracerProvider(otel.Tracers))
	parent := otel.StoreWrites(t, s, "")
	otel.WantWrites(t, "gcs", oteltest.StoreWrites...)
	otel.WantPutSpan(t, "gcs", parent)
}
