package check

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// harnessKinds are fault kinds described at the length of the harness's.
var harnessKinds = []FaultDesc{
	{"pause", "SIGSTOP a holder after its guard check, past its lease; SIGCONT"},
	{"kill", "SIGKILL a holder as it writes; start a fresh worker"},
	{"member", "SIGKILL an etcd member process (the leader half the time); restart it"},
	{"partition", "black-hole a worker's etcd traffic past its lease, then delay it, then heal"},
	{"request", "deliver a worker's next etcd request after its caller gave up, drop its reply, or send it twice"},
	{"replace", "replace an etcd member: MemberRemove (the leader half the time), a learner added and promoted"},
}

// longRun dresses r as a long run's report: hours of faults, thousands of
// locks, a capped duration, metrics from every adapter r's workload
// writes with five-digit counts, and a stall past its bound with its
// detail.
func longRun(r *Report, kind, variant string) *Report {
	r.Kind, r.Variant, r.FaultKinds = kind, variant, harnessKinds
	r.Duration, r.Capped = 14*time.Minute+41*time.Second, 15*time.Minute
	r.Faults = map[FaultKind]int{"pause": 1121, "kill": 1120, "member": 1120, "partition": 1125, "request": 10497, "replace": 141}
	r.Locks, r.LockP50, r.LockP99 = 112_970, 11_634*time.Microsecond, 4_912*time.Millisecond
	r.Metrics = map[string]int64{"acquisitions": 112_970, "losses/validity_expired": 13_300, "losses/session_done": 1_400, "losses/revoked": 12}
	for _, a := range r.adapters() {
		for i, o := range writeOutcomes {
			r.Metrics["writes/"+a+"/"+o] = 99_999 / int64(i+1)
		}
	}
	for k, c := range r.Writes {
		if c.Attempted == 0 {
			r.Writes[k] = &Counts{Attempted: 99_999, Accepted: 99_000, Refused: 9_999, LockLost: 9_999, Unknown: 9_999, Errors: 9_999}
		}
	}
	k := r.Workload.or().Kinds[0]
	r.Violations = append(r.Violations, Violation{Resource: ResourceName(k, "fencecheck-k3"), Kind: vioStall,
		Detail: "the next holder w2.14 (token 1684) of key fencecheck-k3 waited 4.18s from its lock to its first accepted write on each resource " +
			"(bank-etcd 4.1s, bank-pg 4.18s, bank-s3 4.0s; the longest write bank-pg), past its bound of 2s after a pause of w1.13 (token 1671)"})
	r.Stalls = []Stall{{Key: "fencecheck-k3", Next: "w2.14", From: 0, To: int64(4180 * time.Millisecond), Bound: 2 * time.Second}}
	return r
}

// TestSummaryWidth: the text summary of runs of every workload, at the
// size of a long run (all resource kinds, five-digit counts, capped
// durations, long run names and violation details), has no line wider
// than TextWidth, and names every resource kind the run writes in its
// writes table and the adapter that writes it in its metrics.
func TestSummaryWidth(t *testing.T) {
	wl := func(w Workload, fenced bool) *Report {
		r := NewReport(w, nil, nil)
		r.Fenced = fenced
		return r
	}
	tests := []struct {
		name            string
		fenced, control *Report
	}{
		{"register", longRun(synthRun(5, 3000, true), "", ""), longRun(synthRun(5, 3000, false), "", "")},
		{"election", func() *Report { r := longRun(synthRun(6, 600, true), "semaphore", ""); r.Election = true; return r }(), nil},
		{"bank", longRun(wl(Bank, true), "bank", ""), longRun(wl(Bank, false), "bank", "")},
		{"liveness control", longRun(wl(Bank, true), "bank", "without preemption"), nil},
		{"effects", longRun(wl(EffectsWorkload, true), "effects", ""), longRun(wl(EffectsWorkload, false), "effects", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			runs := []*Report{tt.fenced}
			if tt.control != nil {
				runs = append(runs, tt.control)
			}
			for _, r := range runs {
				PrintViolations(&b, r, 10)
			}
			PrintSummary(&b, tt.fenced, tt.control)
			PrintMetrics(&b, tt.fenced)
			out := b.String()
			for i, l := range strings.Split(out, "\n") {
				if n := utf8.RuneCountInString(l); n > TextWidth {
					t.Errorf("line %d is %d characters, want at most %d:\n%s", i+1, n, TextWidth, l)
				}
			}
			if longest := maxLen(tt.fenced.Violations); longest <= TextWidth {
				t.Fatalf("the longest violation is %d characters: the test does not make a line to wrap", longest)
			}
			for _, r := range runs {
				for _, k := range r.Workload.or().Kinds {
					if !hasRow(out, r.label(), string(k)) {
						t.Errorf("no row for %s %s in the writes table:\n%s", r.label(), k, out)
					}
					if !hasRow(out, adapterOf[k], "99999") {
						t.Errorf("no row for %s's adapter %q in the metrics:\n%s", k, adapterOf[k], out)
					}
				}
			}
			t.Logf("\n%s", out)
		})
	}
}

func maxLen(vs []Violation) int {
	n := 0
	for _, v := range vs {
		n = max(n, len("  "+v.String()))
	}
	return n
}

// hasRow reports whether a line of out starts with the fields first.
func hasRow(out string, first ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(first) && strings.Join(f[:len(first)], " ") == strings.Join(first, " ") {
			return true
		}
	}
	return false
}

func TestWrap(t *testing.T) {
	tests := []struct {
		name, first, indent, text, want string
	}{
		{"short", "  ", "    ", "a b c", "  a b c\n"},
		{"hanging", "ab ", "", strings.Repeat("word ", 30), "ab " + strings.TrimSpace(strings.Repeat("word ", 19)) + "\n   " + strings.TrimSpace(strings.Repeat("word ", 11)) + "\n"},
		{"long word", "", "  ", "a " + strings.Repeat("x", 120) + " b", "a\n  " + strings.Repeat("x", 120) + "\n  b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			wrap(&b, tt.first, tt.indent, tt.text)
			if b.String() != tt.want {
				t.Errorf("got\n%q, want\n%q", b.String(), tt.want)
			}
		})
	}
}

// TestNewReportUnlistedKind: a write to a resource kind the workload does
// not list is counted under its kind, not dropped, and is no panic.
func TestNewReportUnlistedKind(t *testing.T) {
	atts := []Attempt{{Worker: "w1.1", Res: ResRedis, Key: "k", Token: 5, Outcome: OutOK}}
	r := NewReport(Workload{Kinds: []ResKind{ResRow}}, nil, atts)
	c := r.Writes[ResRedis]
	if c == nil || c.Accepted != 1 {
		t.Fatalf("got %+v for %s, want 1 accepted", c, ResRedis)
	}
}
