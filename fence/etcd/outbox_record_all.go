package etcdfence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// UpdateAll is [Store.UpdateAll] that also records effects, as
// [Outbox.Update] does for one key: it claims every key with its token,
// calls fn with their records, and writes fn's values and effects in one
// etcd transaction that lands only if no key's floor or record changed
// since the read and no effect is recorded already. Each effect must be
// on one of the claimed keys, with that key's token. The effects are
// recorded in the order of fn's slice, after those of earlier writes.
//
// Its refusals and errors are Store.UpdateAll's and Outbox.Update's; the
// transaction compares 2 keys per claim and one per effect, and puts one
// key per claim and two per effect, each at most [MaxWriteOps]. ctx
// bounds the call.
func (o *Outbox) UpdateAll(ctx context.Context, claims []fence.Claim, fn outbox.UpdateAllFunc) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Outbox.UpdateAll: nil function", ErrInvalidArgument)
	}
	return outbox.RunUpdateAll(ctx, (*outboxRounds)(o), claims, fn)
}

// CheckUpdateAll refuses, before any I/O, more keys than one transaction
// takes.
func (r *outboxRounds) CheckUpdateAll(set []fence.Claim) error {
	return (*rounds)(r.store).CheckUpdateAll(set)
}

// StartUpdateAll starts the span of an UpdateAll, as Store.UpdateAll's.
func (r *outboxRounds) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	return r.store.tel.Op(opUpdateAll).StartUpdateAll(ctx, set)
}

// ClaimReadAll claims every key of set and reads their records, as
// Store.UpdateAll does.
func (r *outboxRounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, claimedAll, error) {
	return (*rounds)(r.store).ClaimReadAll(ctx, set)
}

// WriteAllIf writes next and effects with set's tokens if every floor
// and record is still the one c read.
func (r *outboxRounds) WriteAllIf(ctx context.Context, set []fence.Claim, c claimedAll, next map[string][]byte, effects []outbox.Effect) error {
	o := (*Outbox)(r)
	if err := o.checkRecording(set, next, effects); err != nil {
		return err
	}
	w := o.newWrite(set)
	for i, cl := range set {
		v, ok := next[cl.Resource]
		w.claim(i, c.floorRevs[i], c.revs[i], v, ok)
	}
	return w.commit(ctx, effects)
}
