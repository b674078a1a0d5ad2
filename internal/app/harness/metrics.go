package harness

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fencelock/fencelock/internal/tel"
)

// workerMetrics is a worker's OpenTelemetry SDK: the libraries report to
// the global meter provider, which it replaces with one whose metrics go to
// an in-memory reader. The worker sends what it read after each section
// (a [check.EvMetrics] event), since a killed worker cannot report at its end.
type workerMetrics struct{ reader *sdkmetric.ManualReader }

// installMetrics installs the SDK as the process's global meter provider;
// call it before creating the clients that report to it.
func installMetrics() *workerMetrics {
	m := &workerMetrics{reader: sdkmetric.NewManualReader()}
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(m.reader)))
	return m
}

// snapshot returns the counts so far, keyed as [check.Report.Metrics] is.
func (m *workerMetrics) snapshot(ctx context.Context) map[string]int64 {
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(ctx, &rm); err != nil {
		return nil
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			sum, ok := md.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				if k := metricKey(md.Name, p.Attributes); k != "" {
					out[k] += p.Value
				}
			}
		}
	}
	return out
}

// metricKey names the count a data point adds to, or "" for one not kept.
func metricKey(name string, attrs attribute.Set) string {
	get := func(k string) string { v, _ := attrs.Value(attribute.Key(k)); return v.AsString() }
	switch name {
	case "fencelock.lock.acquisitions":
		return "acquisitions"
	case "fencelock.lock.losses":
		return "losses/" + get("fencelock.cause")
	case tel.WritesMetric:
		return "writes/" + get(string(tel.AttrAdapter)) + "/" + get(string(tel.AttrOutcome))
	}
	return ""
}
