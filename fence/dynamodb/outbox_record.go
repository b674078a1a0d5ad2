package dynamofence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// Update is [Store.Update] that also records effects: it claims key with
// token and reads its record as Store.Update does, calls fn, and writes
// fn's value and effects in one TransactWriteItems:
//
//	Update(record: SET value, version+1, fence_outbox_pos  IF floor = token AND version = read's)
//	Put(effect₁ IF attribute_not_exists(pk)), …
//
// So the effects exist if and only if the write landed: a write refused
// by a newer token (a *[fence.StaleError]) records none. A change by a
// writer with the same token, or a conflict with another transaction,
// makes Update read and call fn again, as Store.Update does. An effect
// already recorded (the same Resource, Token and Seq, pending, parked or
// delivered: a delivered effect's item is kept as a marker, see
// [Outbox]) refuses the write with an error matching
// [outbox.ErrDuplicate], nothing written: after an unknown outcome it
// tells the retry that the first write landed.
//
// fn's effects are checked with [outbox.ValidateAll] against the claim
// before the write is sent; a payload over [WithMaxEffectPayload], more
// than [MaxTxWrites] - 1 effects (DynamoDB's limit on a transaction's
// items), or a write over DynamoDB's 4 MB for a transaction is refused
// with an error matching [outbox.ErrTooLarge], nothing written (the claim
// stays). Other errors, the unknown outcome included, are Store.Update's.
// ctx bounds the call.
func (o *Outbox) Update(ctx context.Context, key string, token fence.Token, fn outbox.UpdateFunc) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Outbox.Update: nil function", ErrInvalidArgument)
	}
	if err := o.store.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return outbox.RunUpdate(ctx, (*outboxRounds)(o), key, token, fn)
}

// outboxRounds is an Outbox's [fence.UpdateRoundsOf] for Update and its
// [outbox.UpdateAllRounds] for UpdateAll.
type outboxRounds Outbox

// StartUpdate starts the span of an Update, as Store.Update's.
func (r *outboxRounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	return r.store.tel.Op(opUpdate).StartUpdate(ctx, key, token)
}

// ClaimRead claims key and reads its record, as Store.Update does (a
// transaction writing the item is a change: read again), with the
// item's last outbox position.
func (r *outboxRounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, claimed, error) {
	c, err := r.store.claim(ctx, key, token)
	if txConflict(err) {
		return fence.Record{}, claimed{}, fmt.Errorf("%w: %w", fence.ErrChanged, err)
	}
	return c.rec, c, err
}

// WriteIf writes rec's value and effects if the floor and the record are
// still those c read.
func (r *outboxRounds) WriteIf(ctx context.Context, key string, token fence.Token, c claimed, rec outbox.Recording) error {
	set := []fence.Claim{{Resource: key, Token: token}}
	return (*Outbox)(r).write(ctx, set, []claimed{c}, map[string][]byte{key: rec.Value}, rec.Effects)
}

// UpdateAll is [Store.UpdateAll] that also records effects, as
// [Outbox.Update] does for one key: it claims every key with its token,
// calls fn with their records, and writes fn's values and effects in one
// TransactWriteItems that lands only if no key's floor or version changed
// since the read and no effect is recorded already. Each effect must be
// on one of the claimed keys, with that key's token. The transaction
// holds one item per claimed key and one per effect, at most
// [MaxTxWrites]. Its refusals and errors are Store.UpdateAll's and
// Outbox.Update's. ctx bounds the call.
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
func (r *outboxRounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, []claimed, error) {
	return (*rounds)(r.store).ClaimReadAll(ctx, set)
}

// WriteAllIf writes next and effects with set's tokens if every floor
// and version is still the one got read.
func (r *outboxRounds) WriteAllIf(ctx context.Context, set []fence.Claim, got []claimed, next map[string][]byte, effects []outbox.Effect) error {
	return (*Outbox)(r).write(ctx, set, got, next, effects)
}
