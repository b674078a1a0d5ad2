package check

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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
// waits, the rest left for the caller to fill in.
func NewReport(wl Workload, events []Event, atts []Attempt) *Report {
	r := &Report{Workload: wl, Writes: map[ResKind]*Counts{}, Events: events}
	for _, k := range wl.or().Kinds {
		r.Writes[k] = &Counts{}
	}
	for _, a := range atts {
		if !a.Read {
			r.Writes[a.Res].add(a)
		}
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

// PrintSummary writes the summary table of a fenced run and, if not nil,
// its control run, and what one fault of each kind is (a member crash is
// SIGKILL of its process, for instance), as fenced.FaultKinds says.
func PrintSummary(w io.Writer, fenced, control *Report) {
	runs := []*Report{fenced}
	if control != nil {
		runs = append(runs, control)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tresource\tattempted\taccepted\trefused (stale)\tlock lost\tunknown\terror\tviolations\t\n")
	for _, r := range runs {
		vs := r.violationsByRes()
		for _, k := range r.Workload.or().Kinds {
			c := r.Writes[k]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.name(), k, c.Attempted, c.Accepted, c.Refused, c.LockLost, c.Unknown, c.Errors, vs[k])
		}
	}
	fmt.Fprintf(tw, "\t\t\t\t\t\t\t\t\t\n")
	fmt.Fprintf(tw, "run\tduration\tfaults (%s)\tlocks\tlock wait p50\tp99\tviolations\tstalls (past bound)\tstall p99\tmax\t\n", fenced.faultHeader())
	for _, r := range runs {
		st := r.StallStats()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d (%d)\t%s\t%s\t\n", r.name(), r.duration(), r.faultCounts(fenced.FaultKinds),
			r.Locks, r.LockP50.Round(time.Microsecond*100), r.LockP99.Round(time.Millisecond), len(r.Violations),
			st.Count, st.Past, st.P99.Round(time.Millisecond), st.Max.Round(time.Millisecond))
	}
	_ = tw.Flush()
	fenced.printFaultKinds(w)
}

// printFaultKinds writes what one fault of each kind is.
func (r *Report) printFaultKinds(w io.Writer) {
	fmt.Fprintln(w, "faults:")
	for _, f := range r.FaultKinds {
		fmt.Fprintf(w, "  %-10s %s\n", f.Kind, f.How)
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

func (r *Report) faultHeader() string {
	var s []string
	for _, f := range r.FaultKinds {
		s = append(s, string(f.Kind))
	}
	return strings.Join(s, "/")
}

// faultCounts lists r's faults of each of kinds (the fenced run's, so that
// the rows of a pair line up).
func (r *Report) faultCounts(kinds []FaultDesc) string {
	var s []string
	for _, f := range kinds {
		s = append(s, fmt.Sprint(r.Faults[f.Kind]))
	}
	return strings.Join(s, "/")
}

// PrintViolations writes the first max violations of r, and a count by kind.
func PrintViolations(w io.Writer, r *Report, max int) {
	fmt.Fprintf(w, "%s run: %d violations %v\n", r.name(), len(r.Violations), r.violationsByKind())
	for i, v := range r.Violations {
		if i == max {
			fmt.Fprintf(w, "  ... %d more\n", len(r.Violations)-max)
			break
		}
		fmt.Fprintf(w, "  %s\n", v)
	}
}
