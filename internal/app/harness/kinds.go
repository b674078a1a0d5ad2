package harness

import (
	"context"
	"math/rand/v2"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// The fault kinds; [faultKinds] says how each is injected.
const (
	faultPause                     = check.FaultPause // the checker measures the next holder's wait after these two
	faultKill                      = check.FaultKill
	faultMember    check.FaultKind = "member"
	faultPartition check.FaultKind = "partition"
	faultRequest   check.FaultKind = "request"
	faultReplace   check.FaultKind = "replace"
)

// faultKind is how the nemesis injects one kind of fault. Adding a kind is
// a fault kind constant, an inject function and one row of [faultKinds]:
// the nemesis, the presets' minimums, the verdict and the summary table all
// follow the table.
type faultKind struct {
	kind check.FaultKind
	// how says what one fault of the kind is, for the summary table.
	how string
	// loops is how many loops inject the kind at once.
	loops int
	// short and long are the faults of the kind a run of the short and the
	// long preset goes on until it has injected.
	short, long int
	// stale: the kind makes stale writes (a holder that goes on writing
	// past its lease), so a control run goes on injecting it, past its
	// minimum, until one has landed on every resource kind.
	stale bool
	// inject injects one fault and reports whether it did.
	inject func(n *nemesis, ctx context.Context, rng *rand.Rand) bool
}

// faultKinds lists every kind, in report order. Pauses are the slowest
// fault (the lease must run out each time), so two loops pause two
// different workers at once. A replacement takes about 0.2 s (5 s now and
// then) and excludes member crashes while it runs, so fewer of them are
// asked for.
var faultKinds = []faultKind{
	{faultPause, "SIGSTOP a holder after its guard check, past its lease; SIGCONT", 2, 20, 120, true, (*nemesis).pause},
	{faultKill, "SIGKILL a holder as it writes; start a fresh worker", 1, 20, 120, false, (*nemesis).kill},
	{faultMember, "SIGKILL an etcd member process (the leader half the time); restart it", 1, 20, 120, false, (*nemesis).restartMember},
	{faultPartition, "black-hole a worker's etcd traffic past its lease, then delay it, then heal", 1, 20, 120, true, (*nemesis).partition},
	{faultRequest, "deliver a worker's next etcd request after its caller gave up, drop its reply, or send it twice", 1, 20, 120, false, (*nemesis).request},
	{faultReplace, "replace an etcd member: MemberRemove (the leader half the time), a learner added and promoted", 1, 5, 40, false, (*nemesis).replaceMember},
}

// faultDescs lists every kind, in report order, with what one fault is.
func faultDescs() []check.FaultDesc {
	var ds []check.FaultDesc
	for _, f := range faultKinds {
		ds = append(ds, check.FaultDesc{Kind: f.kind, How: f.how})
	}
	return ds
}

// FaultsEach returns a minimum of n faults for every kind, for
// [check.Minimums] Faults.
func FaultsEach(n int) map[check.FaultKind]int {
	return faultMinimums(func(faultKind) int { return n })
}

func faultMinimums(n func(faultKind) int) map[check.FaultKind]int {
	m := map[check.FaultKind]int{}
	for _, f := range faultKinds {
		m[f.kind] = n(f)
	}
	return m
}
