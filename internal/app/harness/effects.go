package harness

import (
	"context"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// effectsWorkload is the outbox's proof (KindEffects): each section moves
// money between two accounts in one fenced PostgreSQL transaction and
// records, in it, an effect for an HTTP receiver and one for a JetStream
// stream, which dispatchers in the workers deliver (worker.effects).
type effectsWorkload struct{}

func (effectsWorkload) desc() check.Workload { return check.EffectsWorkload }

func (effectsWorkload) newEstimate() estimate { return effectsEstimate{} }

func (effectsWorkload) setUp(ctx context.Context, r *runner) error { return setUpEffects(ctx, r) }

// check reads what PostgreSQL committed and what the receivers applied.
// Once the workers have stopped it first drains the outbox (a dispatcher
// in the harness process delivers what the workers' left), and the check
// is final: every landed transfer's effects must have been applied.
func (effectsWorkload) check(ctx context.Context, r *runner, atts []check.Attempt) ([]check.Violation, error) {
	final := r.stopped
	if final && r.cfg.Fenced {
		if err := r.fx.drain(ctx, r); err != nil {
			return nil, err
		}
	}
	st, err := r.fx.read(ctx, r)
	if err != nil {
		return nil, err
	}
	st.Final = final
	if final {
		r.fx.applied = st.Applied
	}
	return check.CheckEffects(atts, st), nil
}

// effectsEstimate counts a transfer that ended without an acknowledged
// commit (refused, failed or unanswered: a stale transaction ended by a
// newer holder's preemption):
// in the control its effect may have been sent already. The receivers'
// record decides (runner.uncaughtSoFar).
type effectsEstimate struct{}

func (effectsEstimate) landed(e check.Event) bool {
	return e.Transfer != nil && e.Outcome != check.OutOK
}
