package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Liveness: after a pause or kill of a key's holder, the next holder of
// the key goes on within the old holder's lease and 1 s, whatever the old
// holder is doing (issue 47). [Stalls] measures the wait, [CheckLiveness]
// holds it to its bound; docs/harness.md states the rule.
const (
	// vioStall is a next holder that waited past its bound ([Stall.Bound])
	// between its lock and its first accepted write on a resource of the
	// key.
	vioStall ViolationKind = "stall"

	// StallSlack is what a next holder may wait past the old holder's
	// lease before it is a stall: the "lease + 1 s".
	StallSlack = time.Second
	// FaultSlack is what each fault that may delay the next holder itself
	// adds to its bound, besides its own duration and a lease: the etcd
	// request timeout of a worker's writes (3 s), which a write that a
	// member fault or a request fault holds up may wait out before it is
	// tried again.
	FaultSlack = 3 * time.Second
)

// Stall is how long the next holder of a key waited, after a pause or kill
// of the key's holder, between its lock and its first accepted write on
// each resource of the key: the longest of those waits.
type Stall struct {
	// Fault is the pause or kill, Old the worker it hit, holding Key
	// with OldToken.
	Fault    FaultKind
	Old      string
	OldToken int64
	Key      string
	// Next is the next holder's worker, Token its token on Key. From is
	// when it got the lock, To when the last of the key's resources had
	// its first accepted write by it or a later holder; Open says one had
	// none before the run ended (To is then the run's last event). Waits
	// are, per resource kind, the wait from From to its first accepted
	// write (a kind with none is missing). Res is the kind whose write in
	// the window took longest, the one the next holder waited on.
	Next  string
	Token int64
	From  int64
	To    int64
	Open  bool
	Waits map[ResKind]time.Duration
	Res   ResKind
	// Bound is the lease, StallSlack and Allowance; Allowance is what the
	// faults in the window that may hold up the next holder itself add
	// (each its duration, a lease and FaultSlack), and Excused names them.
	Bound     time.Duration
	Allowance time.Duration
	Excused   []string
}

// Wait is the stall's length.
func (s Stall) Wait() time.Duration { return time.Duration(s.To - s.From) }

// Past reports whether the stall exceeds its bound.
func (s Stall) Past() bool { return s.Wait() > s.Bound }

func (s Stall) String() string {
	end := "its first accepted write on each resource"
	if s.Open {
		end = "the run's end, with a resource never written"
	}
	var per []string
	for _, k := range slices.Sorted(maps.Keys(s.Waits)) {
		per = append(per, fmt.Sprintf("%s %v", k, s.Waits[k].Round(time.Millisecond)))
	}
	end += " (" + strings.Join(per, ", ") + "; the longest write " + string(s.Res) + ")"
	why := ""
	if len(s.Excused) > 0 {
		why = fmt.Sprintf(", %v of it for %s", s.Allowance.Round(time.Millisecond), strings.Join(s.Excused, ", "))
	}
	return fmt.Sprintf("after a %s of %s (token %d), the next holder %s (token %d) waited %v from its lock to %s; bound %v%s",
		s.Fault, s.Old, s.OldToken, s.Next, s.Token, s.Wait().Round(time.Millisecond), end, s.Bound.Round(time.Millisecond), why)
}

// CheckLiveness returns a stall violation for each of stalls past its
// bound, on the resource whose write took longest in its window (the one
// the next holder waited on).
func CheckLiveness(stalls []Stall) []Violation {
	var vs []Violation
	for _, s := range stalls {
		if s.Past() {
			vs = append(vs, vio(ResourceName(s.Res, s.Key), vioStall, s.String()))
		}
	}
	return vs
}

// Stalls measures, for each pause or kill of a worker while it held a
// key's lock, the next holder's wait on that key (see [Stall]), the old
// holder's lease being ttl, over the resource kinds of wl. The next
// holder is the hold of the key with the lowest token above the old one's
// that attempted a write there (readers and holders that never got to a
// write are passed over: their successors are measured). A stall whose
// next holder was itself paused or killed in the window is left out: that
// fault's own stall covers the key. It is a pure function of its
// arguments.
func Stalls(wl Workload, events []Event, ttl time.Duration) []Stall {
	h := newHolds(events)
	atts := Attempts(events)
	end := lastTime(events)
	var out []Stall
	for i, f := range h.faults {
		if (f.Fault != FaultPause && f.Fault != FaultKill) || f.Worker == "" {
			continue
		}
		for _, old := range h.heldAt(f.Worker, f.Call) {
			next, ok := h.next(old, atts)
			if !ok {
				continue
			}
			s := Stall{Fault: f.Fault, Old: f.Worker, OldToken: old.token, Key: old.key, Next: next.worker, Token: next.token, From: next.from}
			s.Waits, s.To, s.Open = firstWrites(wl.or().Kinds, h, atts, next, end)
			if s.Res = longestWrite(h, atts, next, s.To); s.Res == "" {
				s.Res = wl.or().Kinds[0]
			}
			if s.allow(h, i, ttl) {
				out = append(out, s)
			}
		}
	}
	return out
}

// The fault kinds [Stalls] measures after: the harness's pauses
// (SIGSTOP past the lease, then SIGCONT) and kills (SIGKILL) of a holder.
const (
	FaultPause FaultKind = "pause"
	FaultKill  FaultKind = "kill"
)

// allow sets s's allowance and bound from the faults other than
// h.faults[f] that overlap its window: one on an etcd member (a crash, a
// replacement) or a partition or request fault on the next holder's worker
// may hold up its writes, each by its duration, a lease (its keepalive may
// fail and the key pass to the following holder) and FaultSlack. A pause
// or kill in the window of the next holder's worker, or of a later holder
// of the key (the window ends at a write by the next holder or a later
// one), makes s one to leave out (it reports false): that fault's own
// stall covers the key. Faults on other workers add nothing: a next holder
// that waits on them is what is measured.
func (s *Stall) allow(h *holds, f int, ttl time.Duration) bool {
	for i, g := range h.faults {
		if i == f || g.Time < s.From || g.Call > s.To {
			continue
		}
		switch {
		case g.Fault == FaultPause || g.Fault == FaultKill:
			if g.Worker == s.Next {
				return false
			}
			if tok, ok := h.tokenAt(g.Worker, s.Key, g.Call); ok && tok > s.Token {
				return false
			}
		case g.Worker == "" || g.Worker == s.Next:
			s.Allowance += time.Duration(g.Time-g.Call) + ttl + FaultSlack
			s.Excused = append(s.Excused, fmt.Sprintf("a %s fault", g.Fault))
		}
	}
	s.Bound = ttl + StallSlack + s.Allowance
	return true
}

// firstWrites returns the wait from next's lock to the first accepted
// write on each of kinds of next's key, by next or a later holder, and
// when the last of them came; open says some kind had none by end (the
// time is then end).
func firstWrites(kinds []ResKind, h *holds, atts []Attempt, next hold, end int64) (map[ResKind]time.Duration, int64, bool) {
	first := map[ResKind]int64{}
	for _, a := range atts {
		if a.Outcome != OutOK || a.Return < next.from || !h.byNewer(a, next) {
			continue
		}
		if t, seen := first[a.Res]; !seen || a.Return < t {
			first[a.Res] = a.Return
		}
	}
	waits := map[ResKind]time.Duration{}
	to, open := next.from, false
	for _, k := range kinds {
		t, ok := first[k]
		if !ok {
			open = true
			continue
		}
		waits[k], to = time.Duration(t-next.from), max(to, t)
	}
	if open {
		to = end
	}
	return waits, to, open
}

// longestWrite returns the kind of the longest write of next's key by
// next or a later holder between next's lock and to (a write not
// answered by then counted until to).
func longestWrite(h *holds, atts []Attempt, next hold, to int64) ResKind {
	var kind ResKind
	longest := int64(-1)
	for _, a := range atts {
		if a.Call > to || a.Return < next.from || !h.byNewer(a, next) {
			continue
		}
		if d := min(a.Return, to) - max(a.Call, next.from); d > longest {
			kind, longest = a.Res, d
		}
	}
	return kind
}

// byNewer reports whether a is a write of next's key by next or a later
// holder of it.
func (h *holds) byNewer(a Attempt, next hold) bool {
	if a.Read || !touches(a, next.key) {
		return false
	}
	tok, ok := h.tokenAt(a.Worker, next.key, a.Call)
	return ok && tok >= next.token
}

// touches reports whether a writes key: its key, or a bank transfer's
// credited account.
func touches(a Attempt, key string) bool {
	return a.Key == key || a.Transfer != nil && a.Transfer.To == key
}

// lastTime returns the time of the last event.
func lastTime(events []Event) int64 {
	var end int64
	for _, e := range events {
		end = max(end, e.Time)
	}
	return end
}

// stallWaits returns the stalls' waits, sorted.
func stallWaits(stalls []Stall) []time.Duration {
	ws := make([]time.Duration, 0, len(stalls))
	for _, s := range stalls {
		ws = append(ws, s.Wait())
	}
	slices.Sort(ws)
	return ws
}
