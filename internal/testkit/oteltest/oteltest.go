// Package oteltest installs the OpenTelemetry SDK in memory for a test and
// reads back what the code under test reported.
package oteltest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// SDK is a meter provider whose metrics go to an in-memory reader and a
// tracer provider that samples and records every span, and keeps it ([New])
// or exports it ([NewExported]).
type SDK struct {
	Meters  *sdkmetric.MeterProvider
	Tracers *sdktrace.TracerProvider
	reader  *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
}

// New returns an SDK shut down when tb ends.
func New(tb testing.TB) *SDK {
	s := &SDK{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.Meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.Tracers = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(s.spans))
	tb.Cleanup(func() {
		s.Meters.Shutdown(context.Background())
		s.Tracers.Shutdown(context.Background())
	})
	return s
}

// NewExported returns an SDK shut down when tb ends whose spans, every one
// sampled and recorded, go as an application's do: through a batch span
// processor to an exporter, which here drops them. Unlike [New] it keeps
// no span (Span and Spans fail tb), so a benchmark's heap does not grow
// with every span it ends.
func NewExported(tb testing.TB) *SDK {
	s := &SDK{reader: sdkmetric.NewManualReader()}
	s.Meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.Tracers = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	tb.Cleanup(func() {
		s.Meters.Shutdown(context.Background())
		s.Tracers.Shutdown(context.Background())
	})
	return s
}

// Sum returns, for the metric called name, the sum of an int64 counter's
// (or up-down counter's) points, or of a histogram's counts, over the data
// points whose attributes include every one of want.
func (s *SDK) Sum(tb testing.TB, name string, want ...attribute.KeyValue) int64 {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						n += int64(p.Count)
					}
				}
			}
		}
	}
	return n
}

// Bounds returns the bucket boundaries of the histogram called name (of
// its first data point), failing tb if it has recorded nothing.
func (s *SDK) Bounds(tb testing.TB, name string) []float64 {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name && len(h.DataPoints) > 0 {
				return h.DataPoints[0].Bounds
			}
		}
	}
	tb.Fatalf("histogram %s: no data point", name)
	return nil
}

// Span returns the first ended span called name, failing tb if there is
// none.
func (s *SDK) Span(tb testing.TB, name string) sdktrace.ReadOnlySpan {
	tb.Helper()
	s.mustKeep(tb)
	for _, sp := range s.spans.Ended() {
		if sp.Name() == name {
			return sp
		}
	}
	tb.Fatalf("no span %q among %d", name, len(s.spans.Ended()))
	return nil
}

// Spans returns the ended spans called name, in the order they ended.
func (s *SDK) Spans(tb testing.TB, name string) []sdktrace.ReadOnlySpan {
	tb.Helper()
	s.mustKeep(tb)
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.spans.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

func (s *SDK) mustKeep(tb testing.TB) {
	tb.Helper()
	if s.spans == nil {
		tb.Fatal("oteltest: this SDK keeps no spans (NewExported); use New")
	}
}

// Attr returns the value of sp's attribute key.
func Attr(sp sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}
