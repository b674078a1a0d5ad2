package check

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ViolationKind is a kind of safety failure.
type ViolationKind string

// Kinds of [Violation].
const (
	vioTokenOrder   ViolationKind = "token-order"    // a lower token committed after a higher one
	vioLost         ViolationKind = "lost-write"     // a write acknowledged as accepted is not in storage
	vioRefusedLand  ViolationKind = "refused-landed" // a write refused (stale or lock lost) is in storage
	vioPhantom      ViolationKind = "phantom"        // storage holds a value no attempt wrote
	vioLinearizable ViolationKind = "not-linearizable"
	vioUndecided    ViolationKind = "undecided" // porcupine ran out of time: proves nothing either way
)

// Violation is one safety failure the checker found.
type Violation struct {
	Resource string
	Kind     ViolationKind
	Detail   string
	// Values are the writes' values (a bank transfer's ID) the violation
	// is about, for the report to mark; none for one about the whole
	// resource (not linearizable, a bank total).
	Values []string
	// Visual is porcupine's visualization of the resource's history
	// (an HTML document) for a not-linearizable violation.
	Visual []byte
}

// vio returns a violation of kind on res about the writes of values.
func vio(res string, kind ViolationKind, detail string, values ...string) Violation {
	return Violation{Resource: res, Kind: kind, Detail: detail, Values: values}
}

// ResKind returns the kind of the violation's resource.
func (v Violation) ResKind() ResKind {
	kind, _, _ := strings.Cut(v.Resource, ":")
	return ResKind(kind)
}

func (v Violation) String() string { return fmt.Sprintf("%s %s: %s", v.Resource, v.Kind, v.Detail) }

// Check compares the workers' attempts with the storage's record and
// returns every violation, per resource in name order. It is a pure
// function of its arguments.
func Check(atts []Attempt, st *Storage) []Violation {
	byRes := map[string][]Attempt{}
	for _, a := range atts {
		byRes[a.Resource()] = append(byRes[a.Resource()], a)
	}
	for res := range st.Writes {
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
		vs = append(vs, checkResource(res, byRes[res], st.Writes[res], st.Final[res])...)
	}
	return vs
}

func checkResource(res string, atts []Attempt, writes []Record, final string) []Violation {
	vs := checkOrder(res, writes)
	vs = append(vs, checkAttribution(res, atts, writes)...)
	switch err := checkLinearizable(atts, writes, final); {
	case errors.Is(err, errUndecided):
		vs = append(vs, vio(res, vioUndecided, err.Error()))
	case err != nil:
		v := vio(res, vioLinearizable, err.Error())
		var ill *illegalError
		if errors.As(err, &ill) {
			v.Visual = ill.visual
		}
		vs = append(vs, v)
	}
	return vs
}

// checkOrder: accepted tokens never decrease in commit order.
func checkOrder(res string, writes []Record) []Violation {
	var vs []Violation
	for i := 1; i < len(writes); i++ {
		if prev, cur := writes[i-1], writes[i]; cur.Token < prev.Token {
			vs = append(vs, vio(res, vioTokenOrder,
				fmt.Sprintf("token %d (%s) committed after token %d (%s)", cur.Token, cur.Value, prev.Token, prev.Value), cur.Value, prev.Value))
		}
	}
	return vs
}

// checkAttribution: what was acknowledged is stored, what was refused is
// not, and nothing is stored that nobody wrote.
func checkAttribution(res string, atts []Attempt, writes []Record) []Violation {
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
			vs = append(vs, vio(res, vioLost, fmt.Sprintf("%s acknowledged, not in storage", a.Value), a.Value))
		case (a.Outcome == OutStale || a.Outcome == OutLost) && stored[a.Value]:
			vs = append(vs, vio(res, vioRefusedLand, fmt.Sprintf("%s refused (%s), yet in storage", a.Value, a.Outcome), a.Value))
		}
	}
	for _, w := range writes {
		if !written[w.Value] {
			vs = append(vs, vio(res, vioPhantom, w.Value, w.Value))
		}
	}
	return vs
}
