package harness

import (
	"maps"
	"sync"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// history collects the events of every worker of a run, and tallies the
// write outcomes as they come in, so the run can tell when it has enough.
// Create it with newHistory.
type history struct {
	wl check.Workload // set once before use

	mu       sync.Mutex
	est      estimate // the workload's estimate of the control's catches
	events   []check.Event
	accepted map[check.ResKind]int
	refused  map[check.ResKind]int
	landed   map[check.ResKind]int // writes the estimate says made a violation (control runs)
}

func newHistory(wl workload) *history {
	return &history{wl: wl.desc(), est: wl.newEstimate()}
}

func (h *history) add(e check.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	if e.Ev != check.EvDone {
		return
	}
	switch e.Outcome {
	case check.OutOK:
		if h.accepted == nil {
			h.accepted = map[check.ResKind]int{}
		}
		h.accepted[e.Res]++
	case check.OutStale:
		if h.refused == nil {
			h.refused = map[check.ResKind]int{}
		}
		h.refused[e.Res]++
	}
	h.noteLanded(e)
}

// noteLanded counts e, a done event, as landed when the workload's
// estimate says it may have made a violation: a stale write landing after
// a newer one (the register), a transfer acknowledged beside another of
// an account (the bank), a transfer that did not commit, whose effect the
// control may have sent (the effects). With fencing on, the count is not used; in a control run it
// is the live estimate of what the checker will find in the storage (the
// stopping rule only: the checker's verdict is what counts).
func (h *history) noteLanded(e check.Event) {
	if !h.est.landed(e) {
		return
	}
	if h.landed == nil {
		h.landed = map[check.ResKind]int{}
	}
	h.landed[e.Res]++
}

// forget drops the landed counts of kinds: the live estimate counted a
// catch on each that the storage's own record does not show (the
// register's: a reply delayed past a newer write's; the bank's: two
// transfers that overlapped and lost nothing), so the control goes on.
func (h *history) forget(kinds []check.ResKind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range kinds {
		delete(h.landed, k)
	}
}

// progress returns the writes so far (faults are the nemesis's to add).
func (h *history) progress() check.Progress {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := check.Progress{Kinds: h.wl.Kinds, Accepted: maps.Clone(h.accepted), Landed: maps.Clone(h.landed)}
	for _, n := range h.refused {
		p.Refused += n
	}
	return p
}

// lacking lists the resource kinds, in report order, on which no stale
// write has been refused yet (fenced: of every kind the workload writes)
// or has landed (control: of the kinds its control must catch one on).
func (h *history) lacking(fenced bool) []check.ResKind {
	h.mu.Lock()
	defer h.mu.Unlock()
	got, kinds := h.landed, h.wl.MustCatch
	if fenced {
		got, kinds = h.refused, h.wl.Kinds
	}
	var out []check.ResKind
	for _, k := range kinds {
		if got[k] == 0 {
			out = append(out, k)
		}
	}
	return out
}

func (h *history) snapshot() []check.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]check.Event(nil), h.events...)
}
