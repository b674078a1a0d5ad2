package check

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

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

// adapterOf names the adapter that writes each resource kind, as its
// metrics name it (tel.New's adapter): the rows of [PrintMetrics].
var adapterOf = map[ResKind]string{
	ResRow: "postgres", ResTx: "postgres", ResS3: "s3", ResEtcd: "etcd", ResSQL: "sql", ResRedis: "redis", ResJetStream: "jetstream", ResAzure: "azblob",
	ResBankPG: "postgres", ResBankEtcd: "etcd", ResBankS3: "s3",
	ResEffects: "postgres", // the transfer and its effects: postgres.RunInTxAll
}

// guardAdapter is the metrics' name for etcdlock's guard, which refuses a
// write before any I/O once the lock is lost.
const guardAdapter = "guard"

// adapters lists the rows of r's metrics table: the adapters of the
// resource kinds r's workload writes, in report order, then any other
// adapter that reported a write, then the guard.
func (r *Report) adapters() []string {
	var as []string
	for _, k := range r.Workload.or().Kinds {
		if a, ok := adapterOf[k]; ok && !slices.Contains(as, a) {
			as = append(as, a)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Metrics)) {
		if rest, ok := strings.CutPrefix(k, "writes/"); ok {
			if a, _, ok := strings.Cut(rest, "/"); ok && a != guardAdapter && !slices.Contains(as, a) {
				as = append(as, a)
			}
		}
	}
	return append(as, guardAdapter)
}

// PrintMetrics prints the lock and write metrics the run's workers
// reported through OpenTelemetry: acquisitions, losses by cause, and fenced
// writes by adapter and outcome (stale: refused by the resource; lock_lost:
// refused by the guard before any I/O), one row per adapter that writes a
// resource of the run (and any other that reported a write) and one for
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
	wrap(w, "  lock losses: ", "", cmp.Or(strings.Join(losses, ", "), "none"))
	t := table{indent: "  ", left: 1}
	t.add(append([]any{"writes"}, anys(writeOutcomes)...)...)
	var stale int64
	for _, adapter := range r.adapters() {
		row := []any{adapter}
		for _, o := range writeOutcomes {
			row = append(row, m["writes/"+adapter+"/"+o])
		}
		stale += m["writes/"+adapter+"/"+tel.Stale]
		t.add(row...)
	}
	t.write(w)
	fmt.Fprintf(w, "  stale refusals: %d\n", stale)
}

func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
