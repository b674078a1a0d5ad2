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
func (o *Outbox) UpdateAll(ctx context.Context, claims []fence.Claim, fn OutboxAllFunc) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Outbox.UpdateAll: nil function", ErrInvalidArgument)
	}
	r := &outboxAllRounds{o: o}
	return fence.RunUpdateAll(ctx, r, claims, func(old map[string]fence.Record) (map[string][]byte, error) {
		next, effects, err := fn(old)
		r.effects = effects
		return next, err
	})
}

// outboxAllRounds is the [fence.UpdateAllRounds] of one Outbox.UpdateAll:
// effects are those of fn's last call, which RunUpdateAll makes just
// before WriteAllIf, in the same goroutine.
type outboxAllRounds struct {
	o       *Outbox
	effects []outbox.Effect
}

// CheckUpdateAll refuses, before any I/O, more keys than one transaction
// takes.
func (r *outboxAllRounds) CheckUpdateAll(set []fence.Claim) error {
	return (*rounds)(r.o.store).CheckUpdateAll(set)
}

// StartUpdateAll starts the span of an UpdateAll, as Store.UpdateAll's.
func (r *outboxAllRounds) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	return r.o.store.tel.Op(opUpdateAll).StartUpdateAll(ctx, set)
}

// ClaimReadAll claims every key of set and reads their records, as
// Store.UpdateAll does.
func (r *outboxAllRounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, claimedAll, error) {
	return (*rounds)(r.o.store).ClaimReadAll(ctx, set)
}

// WriteAllIf writes next and the effects of fn's last call with set's
// tokens if every floor and record is still the one c read.
func (r *outboxAllRounds) WriteAllIf(ctx context.Context, set []fence.Claim, c claimedAll, next map[string][]byte) error {
	if err := r.o.checkRecording(set, next, r.effects); err != nil {
		return err
	}
	w := r.o.newWrite(set)
	for i, cl := range set {
		v, ok := next[cl.Resource]
		w.claim(i, c.floorRevs[i], c.revs[i], v, ok)
	}
	return w.commit(ctx, r.effects)
}
