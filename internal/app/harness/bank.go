package harness

import (
	"context"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// bankWorkload is Jepsen's bank (KindBank): the run's keys are accounts
// in every bank store (check.BankKinds), and each section moves money
// between two of them on every store (worker.bank).
type bankWorkload struct{}

func (bankWorkload) desc() check.Workload { return check.Bank }

func (bankWorkload) newEstimate() estimate { return &bankEstimate{} }

func (bankWorkload) setUp(ctx context.Context, r *runner) error { return setUpBank(ctx, r) }

// check reads the stores' ledgers: PostgreSQL's in one snapshot, so that
// a check while the workers still write sees whole transfers; a KV
// transfer under way may be seen half-applied, which the checker allows
// for one not acknowledged.
func (bankWorkload) check(ctx context.Context, r *runner, atts []check.Attempt) ([]check.Violation, error) {
	ledgers, err := r.readBank(ctx)
	if err != nil {
		return nil, err
	}
	return check.CheckBank(atts, ledgers), nil
}

// bankEstimate counts a transfer acknowledged on a store as a possible
// lost update when it overlapped, in time, another acknowledged transfer
// of one of its accounts on that store. Under locks only a holder that
// lost its lock (paused, cut off) overlaps the next one, and in the
// control the newer one's plain read may then have missed the older
// one's write. Fenced or not, overlaps that lose nothing count too (the
// newer one waited for the older one's row lock and read after it): the
// storage decides.
type bankEstimate struct {
	last map[resKey]span // per account and store, the acknowledged transfer that returned last
}

// span is a transfer's time on a store: invoked at call, returned at ret.
type span struct{ call, ret int64 }

func (m *bankEstimate) landed(e check.Event) bool {
	if e.Transfer == nil || e.Outcome != check.OutOK {
		return false
	}
	if m.last == nil {
		m.last = map[resKey]span{}
	}
	cur, hit := span{e.Call, e.Time}, false
	for _, acct := range []string{e.Transfer.From, e.Transfer.To} {
		k := resKey{acct, e.Res}
		p, ok := m.last[k]
		hit = hit || ok && p.call < cur.ret && cur.call < p.ret
		if !ok || cur.ret > p.ret {
			m.last[k] = cur
		}
	}
	return hit
}
