package check

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"
)

// Counts tallies write attempts by outcome.
type Counts struct {
	Attempted, Accepted, Refused, LockLost, Unknown, Errors int
}

func (c *Counts) add(a Attempt) {
	c.Attempted++
	switch a.Outcome {
	case OutOK:
		c.Accepted++
	case OutStale:
		c.Refused++
	case OutLost:
		c.LockLost++
	case OutUnknown:
		c.Unknown++
	default:
		c.Errors++
	}
}

// Report is the result of one run.
type Report struct {
	Seed     int64
	Fenced   bool
	Election bool   // the workers were election candidates (Config.Election)
	Kind     string // the kind of lock the workers took, if not Lock (Config.Kind)
	// Variant names a fenced run's library variant, if not the library
	// as it is: "without preemption" (Config.WithoutPreemption).
	Variant string
	// Workload is what the workers wrote; the zero Workload is [Register].
	Workload Workload
	Duration time.Duration
	Writes   map[ResKind]*Counts
	Faults   map[FaultKind]int
	// FaultKinds lists the kinds the run could inject, in report order,
	// with what one fault of each is.
	FaultKinds []FaultDesc
	FaultsLost int // faults given up on: no worker reached a write in time
	// Capped is the run's MaxDuration when that cap ended it before it
	// reached Config.Until; 0 when it reached them.
	Capped     time.Duration
	Locks      int // successful Lock calls
	LockP50    time.Duration
	LockP99    time.Duration
	Violations []Violation
	// Stalls are the next holders' waits after each pause or kill of a
	// holder ([Stalls]); those past their bound are among Violations
	// ([CheckLiveness]).
	Stalls []Stall
	// Events is the run's history: every worker's events and the
	// nemesis's faults, in the order they came in ([WriteHTML] draws it).
	Events []Event
	// Applied are the effects the receivers applied (an effects run's,
	// KindEffects, only), as the final check read them.
	Applied []Applied
	// Metrics are the counts the workers reported through OpenTelemetry,
	// summed: "acquisitions", "losses/<cause>" and
	// "writes/<adapter>/<outcome>" ([PrintMetrics]).
	Metrics map[string]int64
}

// StallStats sums up a run's stalls: how many were measured, how many
// went past their bound, and the waits' 99th percentile and maximum.
type StallStats struct {
	Count, Past int
	P99, Max    time.Duration
}

// StallStats returns r's stall statistics.
func (r *Report) StallStats() StallStats {
	ws := stallWaits(r.Stalls)
	st := StallStats{Count: len(ws), P99: percentile(ws, 99)}
	if len(ws) > 0 {
		st.Max = ws[len(ws)-1]
	}
	for _, s := range r.Stalls {
		if s.Past() {
			st.Past++
		}
	}
	return st
}

// FaultDesc says what one fault of a kind is, for the summary table.
type FaultDesc struct {
	Kind FaultKind
	How  string
}

// NewReport returns the report of a run of wl from its events and
// attempts: the write counts (for the bank, transfers per store) and lock
// waits, the rest left for the caller to fill in. A write to a resource
// kind wl does not list is counted under its kind all the same, so that a
// workload's list falling behind its workers hides no write.
func NewReport(wl Workload, events []Event, atts []Attempt) *Report {
	r := &Report{Workload: wl, Writes: map[ResKind]*Counts{}, Events: events}
	for _, k := range wl.or().Kinds {
		r.Writes[k] = &Counts{}
	}
	for _, a := range atts {
		if a.Read {
			continue
		}
		c := r.Writes[a.Res]
		if c == nil {
			c = &Counts{}
			r.Writes[a.Res] = c
		}
		c.add(a)
	}
	waits := lockWaits(events)
	r.Locks, r.LockP50, r.LockP99 = len(waits), percentile(waits, 50), percentile(waits, 99)
	r.Metrics = lastMetrics(events)
	return r
}

// Progress returns how far the run got, for [Minimums.Shortfalls].
func (r *Report) Progress() Progress {
	p := Progress{Kinds: r.Workload.or().Kinds, Accepted: map[ResKind]int{}, Faults: r.Faults}
	for k, c := range r.Writes {
		p.Accepted[k] = c.Accepted
		p.Refused += c.Refused
	}
	return p
}

// violationsByKind counts the violations of each kind.
func (r *Report) violationsByKind() map[ViolationKind]int {
	m := map[ViolationKind]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

// violationsByRes counts the violations on each resource kind.
func (r *Report) violationsByRes() map[ResKind]int {
	m := map[ResKind]int{}
	for _, v := range r.Violations {
		m[v.ResKind()]++
	}
	return m
}

// PrintSummary writes the summary tables of a fenced run and, if not nil,
// its control run: writes by resource and outcome, locks, stalls, and
// the faults of each kind with what one fault of the kind is (a member
// crash is SIGKILL of its process, for instance), as fenced.FaultKinds
// says. No line is wider than [TextWidth].
func PrintSummary(w io.Writer, fenced, control *Report) {
	runs := []*Report{fenced}
	if control != nil {
		runs = append(runs, control)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name()+" run")
	}
	wrap(w, "", "", "summary: "+strings.Join(names, ", ")+":")
	writes := table{left: 2}
	writes.add("run", "resource", "attempted", "accepted", "refused (stale)", "lock lost", "unknown", "error", "violations")
	for _, r := range runs {
		vs := r.violationsByRes()
		for _, k := range r.Workload.or().Kinds {
			c := cmp.Or(r.Writes[k], &Counts{})
			writes.add(r.label(), k, c.Attempted, c.Accepted, c.Refused, c.LockLost, c.Unknown, c.Errors, vs[k])
		}
	}
	writes.write(w)
	fmt.Fprintln(w)
	locks, stalls := table{left: 1}, table{left: 1}
	locks.add("run", "duration", "locks", "lock wait p50", "p99", "violations")
	stalls.add("run", "stalls", "past their bound", "stall p99", "longest")
	for _, r := range runs {
		st := r.StallStats()
		locks.add(r.label(), r.duration(), r.Locks, r.LockP50.Round(time.Microsecond*100), r.LockP99.Round(time.Millisecond), len(r.Violations))
		stalls.add(r.label(), st.Count, st.Past, st.P99.Round(time.Millisecond), st.Max.Round(time.Millisecond))
	}
	locks.write(w)
	fmt.Fprintln(w)
	stalls.write(w)
	fmt.Fprintln(w)
	printFaults(w, runs)
}

// printFaults writes the faults of each kind the first of runs could
// inject, in each run, and what one fault of the kind is.
func printFaults(w io.Writer, runs []*Report) {
	t := table{indent: "  ", left: 1}
	head := []any{"fault"}
	for _, r := range runs {
		head = append(head, r.label())
	}
	t.add(head...)
	for _, f := range runs[0].FaultKinds {
		row := []any{f.Kind}
		for _, r := range runs {
			row = append(row, r.Faults[f.Kind])
		}
		t.add(row...)
	}
	lines := t.lines()
	fmt.Fprintln(w, "faults injected:")
	fmt.Fprintln(w, lines[0]+"  one fault is")
	for i, f := range runs[0].FaultKinds {
		wrap(w, lines[i+1]+"  ", "", f.How)
	}
}

func (r *Report) duration() string {
	d := r.Duration.Round(time.Second).String()
	if r.Capped > 0 {
		d += " (capped)"
	}
	return d
}

func (r *Report) name() string {
	name := "control"
	if r.Fenced {
		name = "fenced"
	}
	if r.Election {
		name += " (election)"
	}
	if r.Kind != "" {
		name += " (" + r.Kind + ")"
	}
	if r.Variant != "" {
		name += " (" + r.Variant + ")"
	}
	return name
}

// label is r's short name in the summary's tables: "fenced" or
// "control" (its full name heads the summary).
func (r *Report) label() string {
	if r.Fenced {
		return "fenced"
	}
	return "control"
}

// PrintViolations writes the first max violations of r, and a count by
// kind, in lines no wider than [TextWidth].
func PrintViolations(w io.Writer, r *Report, max int) {
	wrap(w, "", "  ", fmt.Sprintf("%s run: %d violations %v", r.name(), len(r.Violations), r.violationsByKind()))
	for i, v := range r.Violations {
		if i == max {
			fmt.Fprintf(w, "  ... %d more\n", len(r.Violations)-max)
			break
		}
		wrap(w, "  ", "    ", v.String())
	}
}
