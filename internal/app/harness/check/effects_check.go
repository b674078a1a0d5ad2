package check

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// CheckEffects checks the effects workload's transfers (the attempts on
// [ResEffects]) against what PostgreSQL and the receivers hold, and
// returns every violation, each on its transfer's account
// (ResourceName(ResEffects, From)). It is a pure function of its
// arguments. On each receiver:
//
//   - no transfer's effect is applied twice (after the receiver's
//     deduplication);
//   - no effect is applied of a transfer PostgreSQL does not hold
//     (refused, failed, or cut off before its commit), nor of a transfer
//     no worker attempted;
//   - with st.Final, every transfer PostgreSQL holds has its effect
//     applied: exactly once, with the first rule.
//
// And every transfer acknowledged to its worker is in PostgreSQL. A
// transfer of unknown outcome may have landed or not: PostgreSQL's log
// says which, and the rules follow it.
func CheckEffects(atts []Attempt, st *Effects) []Violation {
	ts := map[string]Attempt{}
	for _, a := range atts {
		if a.Res == ResEffects && a.Transfer != nil {
			ts[a.Transfer.ID] = a
		}
	}
	var vs []Violation
	for _, rcv := range Receivers {
		vs = append(vs, checkReceiver(rcv, ts, st)...)
	}
	if !st.Final {
		return vs
	}
	for _, id := range slices.Sorted(maps.Keys(ts)) {
		if a := ts[id]; a.Outcome == OutOK && !st.Landed[id] {
			vs = append(vs, vio(ResourceName(ResEffects, a.Transfer.From), vioEffectAcked,
				fmt.Sprintf("transfer %s acknowledged, but not in PostgreSQL's log", id), id))
		}
	}
	return vs
}

// checkReceiver checks what the receiver rcv applied.
func checkReceiver(rcv string, ts map[string]Attempt, st *Effects) []Violation {
	n, first := map[string]int{}, map[string]string{}
	var vs []Violation
	for _, ap := range st.Applied {
		if ap.Receiver != rcv {
			continue
		}
		n[ap.Transfer]++
		if n[ap.Transfer] == 1 {
			first[ap.Transfer] = ap.Key
		}
		a, ok := ts[ap.Transfer]
		res := ResourceName(ResEffects, ap.Resource)
		switch {
		case !ok && st.Final:
			vs = append(vs, vio(res, vioPhantom, fmt.Sprintf("%s applied effect %s of transfer %q, which no worker attempted", rcv, ap.Key, ap.Transfer), ap.Transfer))
		case ok && !st.Landed[ap.Transfer] && (st.Final || returned(a)):
			vs = append(vs, vio(ResourceName(ResEffects, a.Transfer.From), vioEffectUnlanded,
				fmt.Sprintf("%s applied effect %s of transfer %s (%s), which PostgreSQL does not hold", rcv, ap.Key, ap.Transfer, a.Outcome), ap.Transfer))
		}
		if n[ap.Transfer] == 2 {
			vs = append(vs, vio(res, vioEffectTwice, fmt.Sprintf("%s applied transfer %s's effect twice (keys %s, then %s)", rcv, ap.Transfer, first[ap.Transfer], ap.Key), ap.Transfer))
		}
	}
	if !st.Final {
		return vs
	}
	for _, id := range slices.Sorted(maps.Keys(st.Landed)) {
		if a, ok := ts[id]; ok && n[id] == 0 {
			vs = append(vs, vio(ResourceName(ResEffects, a.Transfer.From), vioEffectLost,
				fmt.Sprintf("transfer %s (%s) is in PostgreSQL, but %s never applied its effect", id, a.Outcome, rcv), id))
		}
	}
	return vs
}

// returned reports whether a's transfer has ended as its worker saw it
// (its done event came: acknowledged, refused, failed, or with no answer,
// as a stale transaction ended at its COMMIT by a newer holder's
// preemption). Its transaction is over, so PostgreSQL's log, read after
// the events, says whether it landed; a transfer still under way is left
// to the final check.
func returned(a Attempt) bool {
	return a.Return != math.MaxInt64
}
