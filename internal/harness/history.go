package harness

import (
	"sync"

	"github.com/fencelock/fencelock/internal/harness/check"
)

// history collects the events of every worker of a run, and tallies the
// write outcomes as they come in, so the run can tell when it has enough.
type history struct {
	mu       sync.Mutex
	events   []check.Event
	accepted map[check.ResKind]int
	refused  int
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
		h.refused++
	}
}

// progress returns the writes so far (faults are the nemesis's to add).
func (h *history) progress() check.Progress {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := check.Progress{Accepted: map[check.ResKind]int{}, Refused: h.refused}
	for k, n := range h.accepted {
		p.Accepted[k] = n
	}
	return p
}

func (h *history) snapshot() []check.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]check.Event(nil), h.events...)
}
