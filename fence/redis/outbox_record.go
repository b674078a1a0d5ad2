package redisfence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// Update is [Store.Update] that also records effects: it claims key with
// token and reads its record (one script), calls fn, and writes fn's
// value and effects in a second script, which Redis runs atomically: it
// lands only if the floor is still token, the record's version the one
// read, and no effect is recorded already, and then writes the record and
// the effects together. So the effects exist if and only if the write
// landed: a write refused by a newer token (a *[fence.StaleError])
// records none. A change by a writer with the same token makes Update
// read and call fn again, as Store.Update does. An effect already
// recorded (the same Resource, Token and Seq, pending, parked or
// delivered: the delivered set keeps its key, see [Outbox]) refuses the
// write with an error matching [outbox.ErrDuplicate], nothing written:
// after an unknown outcome it tells the retry the first write landed.
//
// Before the write is sent, fn's effects are checked with
// [outbox.ValidateAll] against the claim, a payload over
// [WithMaxEffectPayload] is refused with [outbox.ErrTooLarge], and a key
// outside the Outbox's hash slot with [ErrCrossSlot] (that one before
// any I/O). The script is sent once; a lost reply gives an error matching
// [fence.ErrUnknownOutcome], as Store.Update's. ctx bounds the call.
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
	// UpdateAll's CheckUpdateAll refuses a key of another slot.
	return o.UpdateAll(ctx, []fence.Claim{{Resource: key, Token: token}}, func(old map[string]fence.Record) (map[string][]byte, []outbox.Effect, error) {
		v, effects, err := fn(old[key])
		if err != nil {
			return nil, nil, err
		}
		return map[string][]byte{key: v}, effects, nil
	})
}

// checkSlot refuses claims whose hashes are not in the Outbox's slot.
func (o *Outbox) checkSlot(set []fence.Claim) error {
	want := Slot(o.key(keySeq))
	for _, c := range set {
		if k := o.store.Key(c.Resource); Slot(k) != want {
			return fmt.Errorf("%w: %q (slot %d) is not in the outbox's slot %d (%q): give the Store's and the Outbox's prefixes one hash tag",
				ErrCrossSlot, k, Slot(k), want, o.prefix)
		}
	}
	return nil
}

// UpdateAll is [Store.UpdateAll] that also records effects, as
// [Outbox.Update] does for one key: one script claims every key, and a
// second writes fn's values and effects if every floor is its token and
// no version changed since the read and no effect is recorded already.
// Each effect must be on one of the claimed keys, with that key's token;
// every key must be in the Outbox's hash slot. The effects are recorded
// in the order of fn's slice, after those of earlier writes. Its
// refusals and errors are Store.UpdateAll's and Outbox.Update's.
func (o *Outbox) UpdateAll(ctx context.Context, claims []fence.Claim, fn outbox.UpdateAllFunc) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Outbox.UpdateAll: nil function", ErrInvalidArgument)
	}
	return outbox.RunUpdateAll(ctx, (*outboxRounds)(o), claims, fn)
}

// outboxRounds is an Outbox's [outbox.UpdateAllRounds].
type outboxRounds Outbox

// CheckUpdateAll refuses, before any I/O, what Store.UpdateAll refuses
// and keys outside the Outbox's slot.
func (r *outboxRounds) CheckUpdateAll(set []fence.Claim) error {
	if err := (*rounds)(r.store).CheckUpdateAll(set); err != nil {
		return err
	}
	return (*Outbox)(r).checkSlot(set)
}

// StartUpdateAll starts the span, as Store.UpdateAll's.
func (r *outboxRounds) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	return r.store.tel.Op(opUpdateAll).StartUpdateAll(ctx, set)
}

// ClaimReadAll is Store.UpdateAll's claim.
func (r *outboxRounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, claimedAll, error) {
	return (*rounds)(r.store).ClaimReadAll(ctx, set)
}

// WriteAllIf is the recording script: next and effects, if every floor
// is its token and no version changed since c was read.
func (r *outboxRounds) WriteAllIf(ctx context.Context, set []fence.Claim, c claimedAll, next map[string][]byte, effects []outbox.Effect) error {
	o := (*Outbox)(r)
	if err := o.checkEffects(set, effects); err != nil {
		return err
	}
	args := make([]any, 0, 4*len(set)+1+3*len(effects))
	for i, cl := range set {
		v, ok := next[cl.Resource]
		args = append(args, padToken(cl.Token), c.versions[i], flag(ok), v)
	}
	args = append(args, o.key(chanWake))
	for i, e := range effects {
		args = append(args, e.Key(), outboxcodec.Encode(e, i), e.Resource)
	}
	keys := append(append([]string(nil), c.keys...), o.key(keySeq), o.key(keyPending), o.key(keyEffects), o.key(keyDelivered))
	reply, err := recordScript.runKeys(ctx, o.store.c, keys, args...)
	if err == nil {
		switch status(reply) {
		case replyChanged:
			return fence.ErrChanged
		case replyDuplicate:
			k, _ := str(reply, 1)
			return fmt.Errorf("%w: %s; nothing written", outbox.ErrDuplicate, k)
		}
	}
	return allResult(set, reply, err)
}

// checkEffects refuses effects that are invalid, not of set, or too large.
func (o *Outbox) checkEffects(set []fence.Claim, effects []outbox.Effect) error {
	if err := outbox.ValidateAll(effects, set); err != nil {
		return err
	}
	for _, e := range effects {
		if len(e.Payload) > o.maxPayload {
			return fmt.Errorf("%w: redisfence: effect %s: a %d-byte payload, over the limit of %d (WithMaxEffectPayload)",
				outbox.ErrTooLarge, e.Key(), len(e.Payload), o.maxPayload)
		}
	}
	return nil
}
