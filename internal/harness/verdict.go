package harness

import "fmt"

// Minimums are what a run must reach for its verdict to mean anything.
type Minimums struct {
	Writes         int // fenced writes accepted, over all resources
	PerResource    int // fenced writes accepted on each resource kind
	FaultsPerKind  int // faults injected of each kind
	RefusedOverall int // stale writes the resources refused, over all
}

// ShortMinimums are the short mode's: what CI requires.
var ShortMinimums = Minimums{Writes: 1000, PerResource: 100, FaultsPerKind: 20, RefusedOverall: 1}

// Verdict returns why the pair of runs proves nothing or shows a stale
// write, or nil when the fenced run is clean and exercised, and the control
// (if any) caught a stale write landing. A porcupine timeout fails the
// fenced run (it proves nothing) and does not count for the control.
func Verdict(fenced, control *Report, min Minimums) []string {
	var why []string
	if n := len(fenced.Violations); n > 0 {
		why = append(why, fmt.Sprintf("fenced run: %d violations, first: %s (replay with seed %d)", n, fenced.Violations[0], fenced.Seed))
	}
	why = append(why, fenced.shortfalls(min)...)
	if control != nil && !control.caughtStaleWrite() {
		why = append(why, "control run: no stale write caught (no token-order or not-linearizable violation): the checker proved nothing")
	}
	return why
}

// shortfalls lists the minimums r did not reach.
func (r *Report) shortfalls(min Minimums) []string {
	var why []string
	t := r.Total()
	if t.Accepted < min.Writes {
		why = append(why, fmt.Sprintf("fenced run: %d writes accepted, want >= %d", t.Accepted, min.Writes))
	}
	if t.Refused < min.RefusedOverall {
		why = append(why, fmt.Sprintf("fenced run: %d stale writes refused, want >= %d: fencing was never exercised", t.Refused, min.RefusedOverall))
	}
	for _, k := range resourceKinds {
		if c := r.Writes[k]; c.Accepted < min.PerResource {
			why = append(why, fmt.Sprintf("fenced run: %d %s writes accepted, want >= %d", c.Accepted, k, min.PerResource))
		}
	}
	for _, k := range FaultKinds {
		if n := r.Faults[k]; n < min.FaultsPerKind {
			why = append(why, fmt.Sprintf("fenced run: %d %s faults, want >= %d", n, k, min.FaultsPerKind))
		}
	}
	return why
}

// caughtStaleWrite reports whether the checker found a stale write landing.
func (r *Report) caughtStaleWrite() bool {
	for _, v := range r.Violations {
		if v.Kind == VioTokenOrder || v.Kind == VioLinearizable {
			return true
		}
	}
	return false
}
