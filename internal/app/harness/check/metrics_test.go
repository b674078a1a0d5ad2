package check

import (
	"strings"
	"testing"
)

// The report sums each worker's last metrics event (an earlier one is a
// snapshot the later one includes), and PrintMetrics shows them.
func TestMetricsReport(t *testing.T) {
	events := []Event{
		{Ev: EvMetrics, Worker: "w0.0", Metrics: map[string]int64{"acquisitions": 1}},
		{Ev: EvMetrics, Worker: "w1.0", Metrics: map[string]int64{"acquisitions": 2, "writes/postgres/stale": 1}},
		{Ev: EvDone, Worker: "w0.0"},
		{Ev: EvMetrics, Worker: "w0.0", Metrics: map[string]int64{"acquisitions": 3, "losses/lease_expired": 1,
			"writes/s3/stale": 2, "writes/guard/lock_lost": 4}},
	}
	got := lastMetrics(events)
	want := map[string]int64{"acquisitions": 5, "losses/lease_expired": 1, "writes/postgres/stale": 1,
		"writes/s3/stale": 2, "writes/guard/lock_lost": 4}
	if len(got) != len(want) {
		t.Fatalf("lastMetrics: got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("lastMetrics[%q]: got %d, want %d", k, got[k], v)
		}
	}
	var b strings.Builder
	PrintMetrics(&b, &Report{Metrics: got})
	for _, line := range []string{"lock acquisitions: 5", "lock losses: lease_expired 1", "stale refusals: 3"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("PrintMetrics: got\n%s\nwant a line with %q", b.String(), line)
		}
	}
}
