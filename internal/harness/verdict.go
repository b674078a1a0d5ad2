package harness

import "fmt"

// Minimums are what a run must reach for its verdict to mean anything, and
// what a run goes on until it reaches ([Config.Until]).
type Minimums struct {
	Writes         int               // fenced writes accepted, over all resources
	PerResource    int               // fenced writes accepted on each resource kind
	RefusedOverall int               // stale writes the resources refused, over all (fenced runs only)
	Faults         map[FaultKind]int // faults injected of each kind
}

// ShortMinimums are the short mode's: what CI requires, and what the verdict
// of every run (short or long) requires.
var ShortMinimums = Minimums{
	Writes: 1000, PerResource: 100, RefusedOverall: 1,
	Faults: faultMinimums(func(f faultKind) int { return f.short }),
}

// progress is how far a run has got: its writes (live, from the workers'
// events, or final, from the report) and its faults.
type progress struct {
	accepted map[string]int // by resource kind
	refused  int
	faults   map[FaultKind]int
}

// writeShortfalls lists the write minimums p has not reached. Refused
// stale writes count only in a fenced run: with fencing off nothing refuses.
func (m Minimums) writeShortfalls(p progress, fenced bool) []string {
	var why []string
	total := 0
	for _, k := range resourceKinds {
		total += p.accepted[k]
	}
	if total < m.Writes {
		why = append(why, fmt.Sprintf("%d writes accepted, want >= %d", total, m.Writes))
	}
	if fenced && p.refused < m.RefusedOverall {
		why = append(why, fmt.Sprintf("%d stale writes refused, want >= %d: fencing was never exercised", p.refused, m.RefusedOverall))
	}
	for _, k := range resourceKinds {
		if c := p.accepted[k]; c < m.PerResource {
			why = append(why, fmt.Sprintf("%d %s writes accepted, want >= %d", c, k, m.PerResource))
		}
	}
	return why
}

// shortfalls lists every minimum p has not reached.
func (m Minimums) shortfalls(p progress, fenced bool) []string {
	why := m.writeShortfalls(p, fenced)
	for _, k := range FaultKinds {
		if n := p.faults[k]; n < m.Faults[k] {
			why = append(why, fmt.Sprintf("%d %s faults, want >= %d", n, k, m.Faults[k]))
		}
	}
	return why
}

// Verdict returns why the pair of runs proves nothing or shows a stale
// write, or nil when the fenced run is clean and exercised, and the control
// (if any) caught a stale write landing. A porcupine timeout fails the
// fenced run (it proves nothing) and does not count for the control.
func Verdict(fenced, control *Report, min Minimums) []string {
	var why []string
	if n := len(fenced.Violations); n > 0 {
		why = append(why, fmt.Sprintf("fenced run: %d violations, first: %s (replay with seed %d)", n, fenced.Violations[0], fenced.Seed))
	}
	short := min.shortfalls(fenced.progress(), true)
	for _, s := range short {
		why = append(why, "fenced run: "+s)
	}
	if len(short) > 0 && fenced.Capped > 0 {
		why = append(why, fmt.Sprintf("fenced run: stopped by its %v cap before reaching the minimums above (a slow or overloaded machine, or stuck workers; replay with seed %d)", fenced.Capped, fenced.Seed))
	}
	if control != nil && !control.caughtStaleWrite() {
		why = append(why, "control run: no stale write caught (no token-order or not-linearizable violation): the checker proved nothing")
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
