package check

import "strings"

// Workload is what a run's workers write, as the report and the verdict
// see it: [Register] or [Bank]. The zero Workload, in a [Report], stands
// for Register.
type Workload struct {
	// Kinds lists the resource kinds written, in report order.
	Kinds []ResKind
	// MustCatch lists the kinds on each of which a control run must show
	// a violation of a kind that catches (see [Workload.Uncaught]), or the
	// checker proved nothing for it.
	MustCatch []ResKind
	// catches are the violation kinds that show a control caught a stale
	// write, in the final check; catchesSoFar, in a check made while the
	// workers still write.
	catches, catchesSoFar []ViolationKind
}

// Register is the register every kind of lock but the bank writes: the
// control must catch a stale write landing on every resource kind, as a
// write committed after a higher token's (token-order) or a register that
// is not linearizable. While the workers still write only token-order
// counts: a history with writes in flight can fail linearizability for no
// fault.
var Register = Workload{Kinds: ResKinds, MustCatch: ResKinds,
	catches: []ViolationKind{vioTokenOrder, vioLinearizable}, catchesSoFar: []ViolationKind{vioTokenOrder}}

// RegisterOf is [Register] writing kinds (of [ResKinds], in its order)
// only: a run of the short preset leaves out the kinds only long runs
// write.
func RegisterOf(kinds []ResKind) Workload {
	w := Register
	w.Kinds, w.MustCatch = kinds, kinds
	return w
}

// Bank is the bank workload ([CheckBank]): the control must lose money on
// PostgreSQL, where a newer holder's plain SELECT reads around the row
// lock of a paused older holder's open transaction and its write, computed
// from that read, lands over the older holder's committed one; any money
// violation counts, while the workers still write too, since the harness
// reads PostgreSQL's balances and log in one snapshot.
//
// The control is not required to lose money on the KV stores, and is
// reported as it comes out: there the control's write is a fenced Put of
// a value computed from a plain Get, and it loses an update only when an
// older holder's late write lands between the newer holder's Get and its
// Put, a window of milliseconds that a pause seldom hits (a late write
// after the newer holder's Put is refused by the floor it raised, and one
// before its Get is read).
var Bank = Workload{Kinds: BankKinds, MustCatch: []ResKind{ResBankPG},
	catches:      []ViolationKind{vioBankLost, vioBankBalance, vioBankTotal, vioBankTwice},
	catchesSoFar: []ViolationKind{vioBankLost, vioBankBalance, vioBankTotal, vioBankTwice}}

// or returns w, or Register for the zero Workload.
func (w Workload) or() Workload {
	if w.Kinds == nil {
		return Register
	}
	return w
}

// Uncaught lists the kinds of MustCatch, in report order, on which vs
// show no violation of a kind that catches: what a control run has not
// proved. soFar says vs come from a check made while the workers still
// write.
func (w Workload) Uncaught(vs []Violation, soFar bool) []ResKind {
	catches := w.catches
	if soFar {
		catches = w.catchesSoFar
	}
	caught := map[ResKind]bool{}
	for _, v := range vs {
		for _, k := range catches {
			if v.Kind == k {
				caught[v.ResKind()] = true
			}
		}
	}
	var missed []ResKind
	for _, k := range w.MustCatch {
		if !caught[k] {
			missed = append(missed, k)
		}
	}
	return missed
}

// catchNames names the violation kinds that catch, for the verdict.
func (w Workload) catchNames() string {
	var s []string
	for _, k := range w.catches {
		s = append(s, string(k))
	}
	return strings.Join(s, " or ")
}
