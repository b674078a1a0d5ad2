package harness

import (
	"context"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// workload is what a run's workers write and how its storage is checked:
// the register every kind of lock writes ([registerWorkload]), or the bank
// ([bankWorkload]), or the outbox's effects ([effectsWorkload]). The runner, the history and the nemesis ask the
// workload only through this; the worker picks its section by Kind.
type workload interface {
	// desc says what the workers write and what the control must catch.
	desc() check.Workload
	// newEstimate returns a live estimate of the control's catches, for
	// the history.
	newEstimate() estimate
	// setUp prepares the storage, after the runner's own set-up and
	// before any worker starts.
	setUp(ctx context.Context, r *runner) error
	// check reads the storage and checks atts against it. While the
	// workers still write it must read a state in which every write
	// acknowledged in atts is visible.
	check(ctx context.Context, r *runner, atts []check.Attempt) ([]check.Violation, error)
}

// workloadOf returns the workload of a run of cfg.
func workloadOf(cfg Config) workload {
	switch cfg.Kind {
	case KindBank:
		return bankWorkload{}
	case KindEffects:
		return effectsWorkload{}
	}
	return registerWorkload{kinds: cfg.resKinds()}
}

// estimate tells, from the workers' events alone, whether a write (a done
// event, of any outcome) may have made a violation the
// control must catch: the control's stopping rule only, as the storage's
// record decides. Not safe for concurrent use (the history's lock guards
// it).
type estimate interface {
	landed(e check.Event) bool
}

// registerWorkload is the register: every key's resources of each kind,
// written with the lock's token.
type registerWorkload struct {
	kinds []check.ResKind // Config.ResKinds
}

func (w registerWorkload) desc() check.Workload { return check.RegisterOf(w.kinds) }

func (registerWorkload) newEstimate() estimate { return &registerEstimate{} }

// setUp has nothing to do: the runner creates the register's tables.
func (registerWorkload) setUp(context.Context, *runner) error { return nil }

func (registerWorkload) check(ctx context.Context, r *runner, atts []check.Attempt) ([]check.Violation, error) {
	st, err := r.readStorage(ctx)
	if err != nil {
		return nil, err
	}
	return check.Check(atts, st), nil
}

// registerEstimate counts a write as a stale write that landed if a write
// with a higher token to the same resource had returned before it did.
// With fencing on nothing lands so.
type registerEstimate struct {
	newest map[resKey]newestOK // per resource, the accepted write with the highest token
}

type resKey struct {
	key string
	res check.ResKind
}

// newestOK is an accepted write: its token and when it returned.
type newestOK struct{ token, time int64 }

func (m *registerEstimate) landed(e check.Event) bool {
	if e.Outcome != check.OutOK {
		return false
	}
	if m.newest == nil {
		m.newest = map[resKey]newestOK{}
	}
	k := resKey{e.Key, e.Res}
	n, ok := m.newest[k]
	switch {
	case !ok || e.Token > n.token:
		m.newest[k] = newestOK{e.Token, e.Time}
	case e.Token < n.token && e.Time > n.time:
		return true
	}
	return false
}
