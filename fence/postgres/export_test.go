package postgres

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// UseTelemetryForTest makes the package's writes report to mp and tp (nil:
// the global providers) until the next call; for benchmarks that alternate
// providers in one loop, from one goroutine.
func UseTelemetryForTest(mp metric.MeterProvider, tp trace.TracerProvider) func() {
	t := newPGTelemetry(mp, tp)
	return func() { telemetry = func() *pgTelemetry { return t } }
}
