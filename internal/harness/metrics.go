package harness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// workerMetrics is a worker's OpenTelemetry SDK: the libraries report to
// the global meter provider, which it replaces with one whose metrics go to
// an in-memory reader. The worker sends what it read after each section
// (an [EvMetrics] event), since a killed worker cannot report at its end.
type workerMetrics struct{ reader *sdkmetric.ManualReader }

// installMetrics installs the SDK as the process's global meter provider;
// call it before creating the clients that report to it.
func installMetrics() *workerMetrics {
	m := &workerMetrics{reader: sdkmetric.NewManualReader()}
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(m.reader)))
	return m
}

// snapshot returns the counts so far, keyed as [Report.Metrics] is.
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
	case "fencelock.writes":
		return "writes/" + get("fencelock.adapter") + "/" + get("fencelock.outcome")
	}
	return ""
}

// lastMetrics sums, over the workers, the last counts each one sent.
func lastMetrics(events []Event) map[string]int64 {
	last := map[string]map[string]int64{}
	for _, e := range events {
		if e.Ev == EvMetrics {
			last[e.Worker] = e.Metrics
		}
	}
	sum := map[string]int64{}
	for _, m := range last {
		for k, v := range m {
			sum[k] += v
		}
	}
	return sum
}

// writeOutcomes are the outcome columns of [PrintMetrics], in order.
var writeOutcomes = []string{"accepted", "stale", "lock_lost", "unknown", "error"}

// PrintMetrics prints the lock and write metrics the run's workers
// reported through OpenTelemetry: acquisitions, losses by cause, and fenced
// writes by adapter and outcome (stale: refused by the resource; lock_lost:
// refused by the guard before any I/O).
func PrintMetrics(w io.Writer, r *Report) {
	m := r.Metrics
	fmt.Fprintf(w, "\nmetrics (OpenTelemetry, as of each worker's last finished section):\n")
	fmt.Fprintf(w, "  lock acquisitions: %d\n", m["acquisitions"])
	var losses []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if cause, ok := strings.CutPrefix(k, "losses/"); ok {
			losses = append(losses, fmt.Sprintf("%s %d", cause, m[k]))
		}
	}
	fmt.Fprintf(w, "  lock losses: %s\n", cmp.Or(strings.Join(losses, ", "), "none"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  writes\t%s\t\n", strings.Join(writeOutcomes, "\t"))
	var stale int64
	for _, adapter := range []string{"postgres", "s3", "guard"} {
		row := []string{}
		for _, o := range writeOutcomes {
			row = append(row, fmt.Sprint(m["writes/"+adapter+"/"+o]))
		}
		stale += m["writes/"+adapter+"/stale"]
		fmt.Fprintf(tw, "  %s\t%s\t\n", adapter, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w, "  stale refusals: %d\n", stale)
}
