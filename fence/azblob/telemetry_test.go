package azblobfence_test

import (
	"testing"

	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token.
func TestTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	s := newStore(t, azblobfence.WithPrefix(fencewant.Prefix(t)), azblobfence.WithMeterProvider(otel.Meters), azblobfence.WithTracerProvider(otel.Tracers))
	parent := otel.StoreWrites(t, s, "")
	otel.WantWrites(t, "azblob", oteltest.StoreWrites...)
	otel.WantPutSpan(t, "azblob", parent)
}
