package harness

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
	Seed       int64
	Fenced     bool
	Election   bool // the workers were election candidates (Config.Election)
	Duration   time.Duration
	Writes     map[string]*Counts // by resource kind
	Faults     map[FaultKind]int
	FaultsLost int // faults given up on: no worker reached a write in time
	// Capped is the run's MaxDuration when that cap ended it before it
	// reached Config.Until; 0 when it reached them.
	Capped     time.Duration
	Locks      int // successful Lock calls
	LockP50    time.Duration
	LockP99    time.Duration
	Violations []Violation
	// Metrics are the counts the workers reported through OpenTelemetry,
	// summed: "acquisitions", "losses/<cause>" and
	// "writes/<adapter>/<outcome>" ([PrintMetrics]).
	Metrics map[string]int64
}

func newReport(cfg *Config, events []Event, atts []Attempt) *Report {
	r := &Report{Seed: cfg.Seed, Fenced: cfg.Fenced, Election: cfg.Election, Writes: map[string]*Counts{}}
	for _, k := range resourceKinds {
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

// Total returns the counts over every resource kind.
func (r *Report) Total() Counts {
	var t Counts
	for _, c := range r.Writes {
		t.Attempted += c.Attempted
		t.Accepted += c.Accepted
		t.Refused += c.Refused
		t.LockLost += c.LockLost
		t.Unknown += c.Unknown
		t.Errors += c.Errors
	}
	return t
}

// progress returns how far the run got, for [Minimums.shortfalls].
func (r *Report) progress() progress {
	p := progress{accepted: map[string]int{}, faults: r.Faults}
	for k, c := range r.Writes {
		p.accepted[k] = c.Accepted
		p.refused += c.Refused
	}
	return p
}

// ViolationsByKind counts the violations of each kind.
func (r *Report) ViolationsByKind() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

// PrintSummary writes the summary table of a fenced run and, if not nil,
// its control run, and what one fault of each kind is (a member crash is
// SIGKILL of its process, for instance).
func PrintSummary(w io.Writer, fenced, control *Report) {
	runs := []*Report{fenced}
	if control != nil {
		runs = append(runs, control)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tresource\tattempted\taccepted\trefused (stale)\tlock lost\tunknown\terror\t\n")
	for _, r := range runs {
		for _, k := range resourceKinds {
			c := r.Writes[k]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.name(), k, c.Attempted, c.Accepted, c.Refused, c.LockLost, c.Unknown, c.Errors)
		}
	}
	fmt.Fprintf(tw, "\t\t\t\t\t\t\t\t\n")
	fmt.Fprintf(tw, "run\tduration\tfaults (%s)\tlocks\tlock wait p50\tp99\tviolations\t\t\n", faultHeader())
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t\t\n", r.name(), r.duration(), r.faultCounts(),
			r.Locks, r.LockP50.Round(time.Microsecond*100), r.LockP99.Round(time.Millisecond), len(r.Violations))
	}
	_ = tw.Flush()
	printFaultKinds(w)
}

// printFaultKinds writes what one fault of each kind is.
func printFaultKinds(w io.Writer) {
	fmt.Fprintln(w, "faults:")
	for _, f := range faultKinds {
		fmt.Fprintf(w, "  %-10s %s\n", f.kind, f.how)
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
	return name
}

func faultHeader() string {
	var s []string
	for _, k := range FaultKinds {
		s = append(s, string(k))
	}
	return strings.Join(s, "/")
}

func (r *Report) faultCounts() string {
	var s []string
	for _, k := range FaultKinds {
		s = append(s, fmt.Sprint(r.Faults[k]))
	}
	return strings.Join(s, "/")
}

// PrintViolations writes the first max violations of r, and a count by kind.
func PrintViolations(w io.Writer, r *Report, max int) {
	fmt.Fprintf(w, "%s run: %d violations %v\n", r.name(), len(r.Violations), r.ViolationsByKind())
	for i, v := range r.Violations {
		if i == max {
			fmt.Fprintf(w, "  ... %d more\n", len(r.Violations)-max)
			break
		}
		fmt.Fprintf(w, "  %s\n", v)
	}
}
