package check

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fencelock/fencelock/internal/tel"
)

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
var writeOutcomes = []string{tel.Accepted, tel.Stale, tel.LockLost, tel.Unknown, tel.Error}

// PrintMetrics prints the lock and write metrics the run's workers
// reported through OpenTelemetry: acquisitions, losses by cause, and fenced
// writes by adapter and outcome (stale: refused by the resource; lock_lost:
// refused by the guard before any I/O), one row per adapter and one for
// the guard.
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
	for _, adapter := range []string{"postgres", "s3", "etcd", "sql", "guard"} {
		row := []string{}
		for _, o := range writeOutcomes {
			row = append(row, fmt.Sprint(m["writes/"+adapter+"/"+o]))
		}
		stale += m["writes/"+adapter+"/"+tel.Stale]
		fmt.Fprintf(tw, "  %s\t%s\t\n", adapter, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w, "  stale refusals: %d\n", stale)
}
