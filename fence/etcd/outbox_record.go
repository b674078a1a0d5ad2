package etcdfence

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// Update is [Store.Update] that also records effects: it claims key
// with token, reads its record, calls fn, and writes fn's value and
// effects in one etcd transaction, which lands only if neither the
// floor nor the record changed since the read and no effect was ever
// recorded already:
//
//	If(ModRevision(floor) = read's, ModRevision(data) = read's, CreateRevision(r/KEY₁) = 0, …)
//	Then(Put(data, record), Put(e/KEY₁, effect₁), Put(r/KEY₁, ""), …)  Else(Get(floor), Get(r/KEY₁), …)
//
// So the effects exist if and only if the write landed: a write refused
// by a newer token (a *[fence.StaleError]) records none. A change by a
// writer with the same token makes Update read and call fn again, as
// Store.Update does. An effect already recorded (the same Resource,
// Token and Seq, pending, parked or delivered: its r/KEY marker stays
// after delivery, see [Outbox]) refuses the write with an error matching
// [outbox.ErrDuplicate], nothing written: after an unknown outcome it
// tells the retry the first write landed.
//
// fn's effects are checked with [outbox.ValidateAll] against the claim
// before the write is sent; a payload over [WithMaxEffectPayload], more
// effects than [MaxWriteOps] leaves room for, or a request over the
// Store's [WithMaxRequestBytes] is refused with an error matching
// [outbox.ErrTooLarge], nothing written (the claim stays). Other errors,
// the unknown outcome included, are Store.Update's. ctx bounds the call.
func (o *Outbox) Update(ctx context.Context, key string, token fence.Token, fn outbox.UpdateFunc) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Outbox.Update: nil function", ErrInvalidArgument)
	}
	if err := o.store.checkWrite(ctx, key, token, 0); err != nil {
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

// ClaimRead claims key and reads its record, as Store.Update does.
func (r *outboxRounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, claimed, error) {
	c, err := r.store.claim(ctx, key, token)
	return c.rec, c, err
}

// WriteIf writes rec's value and effects if the floor and the record are
// still those c read.
func (r *outboxRounds) WriteIf(ctx context.Context, key string, token fence.Token, c claimed, rec outbox.Recording) error {
	o := (*Outbox)(r)
	set := []fence.Claim{{Resource: key, Token: token}}
	values := map[string][]byte{key: rec.Value}
	if err := o.checkRecording(set, values, rec.Effects); err != nil {
		return err
	}
	w := o.newWrite(set)
	w.claim(0, c.floorRev, c.rev, rec.Value, true)
	return w.commit(ctx, rec.Effects)
}

// checkRecording refuses, before the write is sent, effects that are
// invalid or do not belong to set, and a write too large for etcd.
func (o *Outbox) checkRecording(set []fence.Claim, values map[string][]byte, effects []outbox.Effect) error {
	if err := outbox.ValidateAll(effects, set); err != nil {
		return err
	}
	if n := writeOps(len(set), len(effects)); n > MaxWriteOps {
		return fmt.Errorf("%w: etcdfence: %d keys and %d effects make %d operations in one transaction, over etcd's %d",
			outbox.ErrTooLarge, len(set), len(effects), n, MaxWriteOps)
	}
	est := requestFraming
	for _, c := range set {
		est += len(values[c.Resource]) + 3*len(o.store.FloorKey(c.Resource)) + 2*len(o.store.DataKey(c.Resource)) + 2*TokenDigits + keyFraming
	}
	for _, e := range effects {
		if len(e.Payload) > o.opts.maxPayload {
			return fmt.Errorf("%w: etcdfence: effect %s: a %d-byte payload, over the limit of %d (WithMaxEffectPayload)",
				outbox.ErrTooLarge, e.Key(), len(e.Payload), o.opts.maxPayload)
		}
		est += len(o.EffectKey(e.Resource, e.Token, e.Seq)) + 3*len(o.seenKey(e)) + outboxcodec.Size(e) + 24
	}
	if est > o.store.opts.maxRequestBytes {
		return fmt.Errorf("%w: %w: the write of %q and %d effects makes a request of about %d bytes, over the limit of %d (WithMaxRequestBytes)",
			outbox.ErrTooLarge, ErrValueTooLarge, fence.ClaimsLabel(set), len(effects), est, o.store.opts.maxRequestBytes)
	}
	return nil
}

// writeOps is the larger of the compares (two per key, one per effect)
// and the puts (one per key, two per effect) of a recording transaction
// of keys keys and effects effects: etcd's --max-txn-ops bounds each.
func writeOps(keys, effects int) int {
	return max(2*keys+effects, keys+2*effects)
}

// recordWrite is one recording transaction being built: the compares,
// puts and refusal reads of its claims, to which commit adds its effects'.
type recordWrite struct {
	o    *Outbox
	set  []fence.Claim
	cmps []clientv3.Cmp
	puts []clientv3.Op
	gets []clientv3.Op // one Get of each claim's floor, then of each effect's key
	keys []string      // the claims written, whose turns commit takes
}

func (o *Outbox) newWrite(set []fence.Claim) *recordWrite {
	return &recordWrite{o: o, set: set}
}

// claim adds the compares of claim i (its floor's and its record's mod
// revisions as read), and the put of its value when write.
func (w *recordWrite) claim(i int, floorRev, rev int64, value []byte, write bool) {
	c, s := w.set[i], w.o.store
	floor, data := s.FloorKey(c.Resource), s.DataKey(c.Resource)
	w.cmps = append(w.cmps, clientv3.Compare(clientv3.ModRevision(floor), "=", floorRev), clientv3.Compare(clientv3.ModRevision(data), "=", rev))
	if write {
		w.puts = append(w.puts, clientv3.OpPut(floor, padToken(c.Token)), clientv3.OpPut(data, encodeRecord(c.Token, value)))
		w.keys = append(w.keys, c.Resource)
	}
	w.gets = append(w.gets, clientv3.OpGet(floor))
}

// commit adds effects (each new: no r/KEY yet, so never recorded, even
// if since delivered) and sends the transaction.
// It returns nil when it landed, a *fence.StaleError when a floor was
// above its claim's token, ErrDuplicate when an effect was recorded
// already, and fence.ErrChanged when a record or floor changed.
func (w *recordWrite) commit(ctx context.Context, effects []outbox.Effect) error {
	leave, err := w.o.store.turns(ctx, opUpdate, w.keys...)
	if err != nil {
		return err
	}
	defer leave()
	for i, e := range effects {
		k, seen := w.o.EffectKey(e.Resource, e.Token, e.Seq), w.o.seenKey(e)
		w.cmps = append(w.cmps, clientv3.Compare(clientv3.CreateRevision(seen), "=", 0))
		w.puts = append(w.puts, clientv3.OpPut(k, outboxcodec.Encode(e, i)), clientv3.OpPut(seen, ""))
		w.gets = append(w.gets, clientv3.OpGet(seen, clientv3.WithKeysOnly()))
	}
	resp, err := w.o.store.kv.Txn(ctx).If(w.cmps...).Then(w.puts...).Else(w.gets...).Commit()
	if err != nil {
		err = writeError(opUpdate, fence.ClaimsLabel(w.set), w.set[0].Token, err)
		if errors.Is(err, ErrValueTooLarge) {
			return fmt.Errorf("%w: %w", outbox.ErrTooLarge, err)
		}
		return err
	}
	w.o.store.saw(resp.Header)
	if resp.Succeeded {
		return nil
	}
	if err := staleAmong(w.set, resp, 0); err != nil {
		return err
	}
	for i, e := range effects {
		if firstKV(resp, len(w.set)+i) != nil {
			return fmt.Errorf("%w: %s (resource %q, token %d, seq %d); nothing written", outbox.ErrDuplicate, e.Key(), e.Resource, e.Token, e.Seq)
		}
	}
	return fence.ErrChanged
}
