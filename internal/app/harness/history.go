package harness

import (
	"maps"
	"sync"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// history collects the events of every worker of a run, and tallies the
// write outcomes as they come in, so the run can tell when it has enough.
type history struct {
	mu       sync.Mutex
	events   []check.Event
	accepted map[check.ResKind]int
	refused  map[check.ResKind]int
	landed   map[check.ResKind]int // writes accepted after a newer token's had returned (control runs)
	newest   map[resKey]newestOK   // per resource, the accepted write with the highest token
}

type resKey struct {
	key string
	res check.ResKind
}

// newestOK is an accepted write: its token and when it returned.
type newestOK struct{ token, time int64 }

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
		h.noteAccepted(e)
	case check.OutStale:
		if h.refused == nil {
			h.refused = map[check.ResKind]int{}
		}
		h.refused[e.Res]++
	}
}

// noteAccepted counts e as a stale write that landed if a write with a
// higher token to the same resource had returned before e did. With fencing
// on nothing lands so; in a control run this is the live estimate of what
// the checker will find in the storage (the stopping rule only: the
// checker's verdict is what counts).
func (h *history) noteAccepted(e check.Event) {
	if h.newest == nil {
		h.newest = map[resKey]newestOK{}
	}
	k := resKey{e.Key, e.Res}
	n, ok := h.newest[k]
	switch {
	case !ok || e.Token > n.token:
		h.newest[k] = newestOK{e.Token, e.Time}
	case e.Token < n.token && e.Time > n.time:
		if h.landed == nil {
			h.landed = map[check.ResKind]int{}
		}
		h.landed[e.Res]++
	}
}

// forget drops the landed counts of kinds: the live estimate counted a
// stale write landing on each that the storage's own record does not show
// (a reply delayed past a newer write's), so the control goes on.
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
	p := check.Progress{Accepted: maps.Clone(h.accepted), Landed: maps.Clone(h.landed)}
	for _, n := range h.refused {
		p.Refused += n
	}
	return p
}

// lacking lists the resource kinds, in report order, on which no stale
// write has been refused yet (fenced) or has landed (control).
func (h *history) lacking(fenced bool) []check.ResKind {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.landed
	if fenced {
		got = h.refused
	}
	var out []check.ResKind
	for _, k := range check.ResKinds {
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
