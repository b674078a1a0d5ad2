package dynamofence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// OutboxFunc computes what an [Outbox.Update] writes from the record it
// claimed (the zero Record when the key holds no value): the record's
// next value and the effects recorded with it, whose Resource and Token
// must be the Update's key and token. An error is returned as it is and
// nothing is written.
type OutboxFunc func(old fence.Record) (next []byte, effects []outbox.Effect, err error)

// OutboxAllFunc is [OutboxFunc] for [Outbox.UpdateAll]: the values of
// the keys it writes, as a [fence.UpdateAllFunc] returns them, and the
// effects, each on one of the claimed keys with that key's token.
type OutboxAllFunc func(old map[string]fence.Record) (next map[string][]byte, effects []outbox.Effect, err error)

// recording is what an OutboxFunc returned.
type recording struct {
	value   []byte
	effects []outbox.Effect
}

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
// already recorded (the same Resource, Token and Seq, pending or parked)
// refuses the write with an error matching [outbox.ErrDuplicate],
// nothing written: after an unknown outcome it tells the retry that the
// first write landed. (Once delivered, an effect's item is deleted, and a
// retry records it again; its idempotency key is the same, so the
// receiver drops the copy.)
//
// fn's effects are checked with [outbox.ValidateAll] against the claim
// before the write is sent; a payload over [WithMaxEffectPayload], more
// than [MaxTxWrites] - 1 effects (DynamoDB's limit on a transaction's
// items), or a write over DynamoDB's 4 MB for a transaction is refused
// with an error matching [outbox.ErrTooLarge], nothing written (the claim
// stays). Other errors, the unknown outcome included, are Store.Update's.
// ctx bounds the call.
func (o *Outbox) Update(ctx context.Context, key string, token fence.Token, fn OutboxFunc) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Outbox.Update: nil function", ErrInvalidArgument)
	}
	if err := o.store.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return fence.RunUpdateOf(ctx, (*outboxRounds)(o), key, token, func(old fence.Record) (recording, error) {
		v, effects, err := fn(old)
		return recording{value: v, effects: effects}, err
	})
}

// outboxRounds is an Outbox's [fence.UpdateRoundsOf].
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
func (r *outboxRounds) WriteIf(ctx context.Context, key string, token fence.Token, c claimed, rec recording) error {
	set := []fence.Claim{{Resource: key, Token: token}}
	return (*Outbox)(r).write(ctx, set, []claimed{c}, map[string][]byte{key: rec.value}, rec.effects)
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
func (r *outboxAllRounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, []claimed, error) {
	return (*rounds)(r.o.store).ClaimReadAll(ctx, set)
}

// WriteAllIf writes next and the effects of fn's last call with set's
// tokens if every floor and version is still the one got read.
func (r *outboxAllRounds) WriteAllIf(ctx context.Context, set []fence.Claim, got []claimed, next map[string][]byte) error {
	return r.o.write(ctx, set, got, next, r.effects)
}
