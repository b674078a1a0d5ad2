package check

import (
	"cmp"
	"math"
	"slices"
)

// hold is one successful lock of a key by a worker, from its lock event
// until its unlock event, or math.MaxInt64 when it has none (the worker
// died holding it, or the run ended).
type hold struct {
	worker, key string
	token       int64
	from, to    int64
}

// holds are a run's lock holds, by key and by worker, and its faults, in
// the order the events came in.
type holds struct {
	byKey    map[string][]hold // in token order
	byWorker map[string][]hold // in lock order
	faults   []Event
}

func newHolds(events []Event) *holds {
	h := &holds{byKey: map[string][]hold{}, byWorker: map[string][]hold{}}
	type id struct {
		w, key string
		tok    int64
	}
	open := map[id]int{} // index in byWorker[w]
	for _, e := range events {
		k := id{e.Worker, e.Key, e.Token}
		switch {
		case e.Ev == EvLock && e.OK:
			open[k] = len(h.byWorker[e.Worker])
			h.byWorker[e.Worker] = append(h.byWorker[e.Worker], hold{e.Worker, e.Key, e.Token, e.Time, math.MaxInt64})
		case e.Ev == EvUnlock:
			if i, ok := open[k]; ok {
				h.byWorker[e.Worker][i].to = e.Time
				delete(open, k)
			}
		case e.Ev == EvFault:
			h.faults = append(h.faults, e)
		}
	}
	for _, ws := range h.byWorker {
		for _, x := range ws {
			h.byKey[x.key] = append(h.byKey[x.key], x)
		}
	}
	for _, ks := range h.byKey {
		slices.SortFunc(ks, func(a, b hold) int { return cmp.Compare(a.token, b.token) })
	}
	return h
}

// heldAt returns the holds worker had at time t.
func (h *holds) heldAt(worker string, t int64) []hold {
	var out []hold
	for _, x := range h.byWorker[worker] {
		if x.from <= t && t <= x.to {
			out = append(out, x)
		}
	}
	return out
}

// tokenAt returns the token of worker's hold of key at time t.
func (h *holds) tokenAt(worker, key string, t int64) (int64, bool) {
	for _, x := range h.byWorker[worker] {
		if x.key == key && x.from <= t && t <= x.to {
			return x.token, true
		}
	}
	return 0, false
}

// next returns the hold of old's key with the lowest token above old's
// whose worker attempted a write of the key while holding it.
func (h *holds) next(old hold, atts []Attempt) (hold, bool) {
	for _, x := range h.byKey[old.key] {
		if x.token > old.token && wrote(x, atts) {
			return x, true
		}
	}
	return hold{}, false
}

// wrote reports whether x's worker attempted a write of x's key during x.
func wrote(x hold, atts []Attempt) bool {
	for _, a := range atts {
		if !a.Read && a.Worker == x.worker && touches(a, x.key) && x.from <= a.Call && a.Call <= x.to {
			return true
		}
	}
	return false
}
