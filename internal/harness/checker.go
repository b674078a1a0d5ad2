package harness

import (
	"errors"
	"fmt"
	"sort"
)

// Kinds of [Violation].
const (
	VioTokenOrder   = "token-order"    // a lower token committed after a higher one
	VioLost         = "lost-write"     // a write acknowledged as accepted is not in storage
	VioRefusedLand  = "refused-landed" // a write refused (stale or lock lost) is in storage
	VioPhantom      = "phantom"        // storage holds a value no attempt wrote
	VioLinearizable = "not-linearizable"
	VioUndecided    = "undecided" // porcupine ran out of time: proves nothing either way
)

// Violation is one safety failure the checker found.
type Violation struct {
	Resource string
	Kind     string
	Detail   string
}

func (v Violation) String() string { return fmt.Sprintf("%s %s: %s", v.Resource, v.Kind, v.Detail) }

// check compares the workers' attempts with the storage's record and
// returns every violation, per resource in name order.
func check(atts []Attempt, st *storageHistory) []Violation {
	byRes := map[string][]Attempt{}
	for _, a := range atts {
		byRes[a.Resource()] = append(byRes[a.Resource()], a)
	}
	for res := range st.writes {
		if _, ok := byRes[res]; !ok {
			byRes[res] = nil
		}
	}
	names := make([]string, 0, len(byRes))
	for res := range byRes {
		names = append(names, res)
	}
	sort.Strings(names)
	var vs []Violation
	for _, res := range names {
		vs = append(vs, checkResource(res, byRes[res], st.writes[res], st.final[res])...)
	}
	return vs
}

func checkResource(res string, atts []Attempt, writes []record, final string) []Violation {
	vs := checkOrder(res, writes)
	vs = append(vs, checkAttribution(res, atts, writes)...)
	switch err := checkLinearizable(atts, writes, final); {
	case errors.Is(err, errUndecided):
		vs = append(vs, Violation{res, VioUndecided, err.Error()})
	case err != nil:
		vs = append(vs, Violation{res, VioLinearizable, err.Error()})
	}
	return vs
}

// checkOrder: accepted tokens never decrease in commit order.
func checkOrder(res string, writes []record) []Violation {
	var vs []Violation
	for i := 1; i < len(writes); i++ {
		if prev, cur := writes[i-1], writes[i]; cur.Token < prev.Token {
			vs = append(vs, Violation{res, VioTokenOrder,
				fmt.Sprintf("token %d (%s) committed after token %d (%s)", cur.Token, cur.Value, prev.Token, prev.Value)})
		}
	}
	return vs
}

// checkAttribution: what was acknowledged is stored, what was refused is
// not, and nothing is stored that nobody wrote.
func checkAttribution(res string, atts []Attempt, writes []record) []Violation {
	stored := map[string]bool{}
	for _, w := range writes {
		stored[w.Value] = true
	}
	written := map[string]bool{}
	var vs []Violation
	for _, a := range atts {
		if a.Read {
			continue
		}
		written[a.Value] = true
		switch {
		case a.Outcome == OutOK && !stored[a.Value]:
			vs = append(vs, Violation{res, VioLost, fmt.Sprintf("%s acknowledged, not in storage", a.Value)})
		case (a.Outcome == OutStale || a.Outcome == OutLost) && stored[a.Value]:
			vs = append(vs, Violation{res, VioRefusedLand, fmt.Sprintf("%s refused (%s), yet in storage", a.Value, a.Outcome)})
		}
	}
	for _, w := range writes {
		if !written[w.Value] {
			vs = append(vs, Violation{res, VioPhantom, w.Value})
		}
	}
	return vs
}
