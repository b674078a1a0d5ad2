package check

import (
	"fmt"
	"slices"
	"time"
)

// FaultKind names a kind of fault a run injects.
type FaultKind string

// Minimums are what a run must reach for its verdict to mean anything, and
// what a run goes on until it reaches (the harness's Config.Until).
type Minimums struct {
	Writes         int               // fenced writes accepted, over all resources
	PerResource    int               // fenced writes accepted on each resource kind
	RefusedOverall int               // stale writes the resources refused, over all (fenced runs); a control run goes on until as many landed
	Faults         map[FaultKind]int // faults injected of each kind
}

// Progress is how far a run has got: its writes (live, from the workers'
// events, or final, from the report) and its faults.
type Progress struct {
	// Kinds are the resource kinds the run writes, in report order:
	// Minimums.PerResource applies to each.
	Kinds    []ResKind
	Accepted map[ResKind]int
	Refused  int
	// Landed counts, per resource kind, the writes accepted after a newer
	// token's write to the same resource had returned (live runs with
	// fencing off only: the control's stopping rule).
	Landed map[ResKind]int
	Faults map[FaultKind]int
}

// WriteShortfalls lists the write minimums p has not reached. Refused
// stale writes count only in a fenced run: with fencing off nothing refuses.
func (m Minimums) WriteShortfalls(p Progress, fenced bool) []string {
	var why []string
	total := 0
	for _, k := range p.Kinds {
		total += p.Accepted[k]
	}
	if total < m.Writes {
		why = append(why, fmt.Sprintf("%d writes accepted, want >= %d", total, m.Writes))
	}
	if fenced && p.Refused < m.RefusedOverall {
		why = append(why, fmt.Sprintf("%d stale writes refused, want >= %d: fencing was never exercised", p.Refused, m.RefusedOverall))
	}
	for _, k := range p.Kinds {
		if c := p.Accepted[k]; c < m.PerResource {
			why = append(why, fmt.Sprintf("%d %s writes accepted, want >= %d", c, k, m.PerResource))
		}
	}
	return why
}

// Shortfalls lists every minimum p has not reached, the fault kinds in
// name order.
func (m Minimums) Shortfalls(p Progress, fenced bool) []string {
	why := m.WriteShortfalls(p, fenced)
	kinds := make([]FaultKind, 0, len(m.Faults))
	for k := range m.Faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		if n := p.Faults[k]; n < m.Faults[k] {
			why = append(why, fmt.Sprintf("%d %s faults, want >= %d", n, k, m.Faults[k]))
		}
	}
	return why
}

// LivenessVerdict returns why r, a liveness control (a fenced run of the
// library without what keeps a next holder live), proves nothing: it must
// show a stall past its bound ([CheckLiveness]), and no safety violation,
// since the library without it is still safe.
func LivenessVerdict(r *Report) []string {
	var why []string
	stalls := 0
	for _, v := range r.Violations {
		if v.Kind == vioStall {
			stalls++
			continue
		}
		why = append(why, fmt.Sprintf("%s run: a safety violation: %s (replay with seed %d)", r.name(), v, r.Seed))
	}
	if stalls == 0 {
		st := r.StallStats()
		why = append(why, fmt.Sprintf("%s run: no stall past its bound (%d stalls measured, the longest %v): the liveness check proved nothing (replay with seed %d)",
			r.name(), st.Count, st.Max.Round(time.Millisecond), r.Seed))
	}
	return why
}

// Verdict returns why the pair of runs proves nothing or shows a stale
// write, or nil when the fenced run is clean and exercised, and the control
// (if any) caught a stale write landing on every resource kind its
// workload must catch one on ([Workload.MustCatch]): a kind on which the
// control shows none is a kind the checker proved nothing for. A porcupine
// timeout fails the fenced run (it proves nothing) and does not count for
// the control.
func Verdict(fenced, control *Report, min Minimums) []string {
	var why []string
	if n := len(fenced.Violations); n > 0 {
		why = append(why, fmt.Sprintf("fenced run: %d violations, first: %s (replay with seed %d)", n, fenced.Violations[0], fenced.Seed))
	}
	short := min.Shortfalls(fenced.Progress(), true)
	for _, s := range short {
		why = append(why, "fenced run: "+s)
	}
	if len(short) > 0 && fenced.Capped > 0 {
		why = append(why, fmt.Sprintf("fenced run: stopped by its %v cap before reaching the minimums above (a slow or overloaded machine, or stuck workers; replay with seed %d)", fenced.Capped, fenced.Seed))
	}
	if control == nil {
		return why
	}
	wl := control.Workload.or()
	if missed := wl.Uncaught(control.Violations, false); len(missed) > 0 {
		why = append(why, fmt.Sprintf("control run: no stale write caught on %v (no %s violation): the checker proved nothing for them (replay with seed %d)",
			missed, wl.catchNames(), control.Seed))
	}
	return why
}
