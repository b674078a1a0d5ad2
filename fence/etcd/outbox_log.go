package etcdfence

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// Pending returns up to limit recorded effects in scope that are neither
// settled nor parked and whose resource is not in skip, in recording
// order: by the revision of the write that recorded them, then by their
// place in its slice ([outbox.Log]). It reads every effect key and
// parked marker under the prefix in one linearizable read, so its cost
// grows with the effects not yet settled, not with those delivered. It
// refuses a limit below 1 and an invalid scope with an error matching
// [fence.ErrInvalidArgument], and returns [ErrCorrupt] for an effect key
// holding something this package did not write, and an error matching
// [outbox.ErrNotPermitted] when etcd denies the read (auth on, the user
// without read permission on the prefix). ctx bounds the read.
func (o *Outbox) Pending(ctx context.Context, scope outbox.Scope, skip []string, limit int) ([]outbox.Effect, error) {
	if err := o.checkList(ctx, scope, limit); err != nil {
		return nil, err
	}
	effects, parked, err := o.readAll(ctx)
	if err != nil {
		return nil, err
	}
	var out []outbox.Effect
	for _, s := range effects {
		if len(out) == limit {
			break
		}
		if _, p := parked[s.e.Key()]; !p && scope.Has(s.e.Resource) && !slices.Contains(skip, s.e.Resource) {
			out = append(out, s.e)
		}
	}
	return out, nil
}

// checkList validates the arguments of Pending and Parked.
func (o *Outbox) checkList(ctx context.Context, scope outbox.Scope, limit int) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	return outboxcodec.CheckList(scope, limit, ErrInvalidArgument)
}

// readAll reads every recorded effect, in recording order, and the
// markers of the parked ones by effect key, in one transaction.
func (o *Outbox) readAll(ctx context.Context) ([]stored, map[string][]byte, error) {
	resp, err := o.store.kv.Txn(ctx).Then(
		clientv3.OpGet(o.prefix+effectSpace, clientv3.WithPrefix()),
		clientv3.OpGet(o.prefix+parkedSpace, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, nil, notPermitted(fmt.Errorf("etcdfence: reading the outbox under %q: %w", o.prefix, err))
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	effects := make([]stored, 0, len(kvs))
	for _, kv := range kvs {
		s, err := decodeEffect(string(kv.Key), kv.ModRevision, kv.Value)
		if err != nil {
			return nil, nil, err
		}
		effects = append(effects, s)
	}
	slices.SortFunc(effects, func(a, b stored) int {
		if a.rev != b.rev {
			return int(a.rev - b.rev)
		}
		return a.pos - b.pos
	})
	parked := make(map[string][]byte)
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		parked[strings.TrimPrefix(string(kv.Key), o.prefix+parkedSpace)] = kv.Value
	}
	return effects, parked, nil
}

// maxSettleOps is how many operations a nested transaction of Settle
// holds, below etcd's --max-txn-ops.
const maxSettleOps = 100

// Settle records that each of done was delivered (its key deleted; its
// r/KEY marker, created with it, stays, so that it cannot be recorded
// again) or parked (a marker put beside it, if it is still recorded),
// in one etcd
// transaction fenced on by: the floor key PREFIX f/by.Resource holds the
// highest token that has settled through it, and the transaction
//
//	If(Value(floor) > by.Token)  Then(Get(floor))  Else(Put(floor, by.Token), Txn(Delete(e/KEY₁), …), …)
//
// marks nothing and returns a *[fence.StaleError] when a higher token has
// settled; otherwise it raises the floor and marks them all. With no
// effects it only raises the floor: a dispatcher's takeover. The floor is
// the dispatcher's own and has nothing to do with the tokens of the
// effects' writers. An effect already settled or no longer recorded is
// passed over; one given twice counts once.
//
// When etcd gives no answer the error matches [fence.ErrUnknownOutcome]
// (the one rule of [Store.Put]); when it denies the user permission, it
// matches [outbox.ErrNotPermitted]. It refuses an invalid by before any I/O.
// A request over [WithMaxRequestBytes] is refused by etcd, and nothing
// is marked. ctx bounds the request.
func (o *Outbox) Settle(ctx context.Context, by fence.Claim, done []outbox.Settled) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := fence.CheckRead(ctx, by.Resource, by.Token); err != nil {
		return err
	}
	floor, tok := o.floorKey(by.Resource), padToken(by.Token)
	resp, err := o.store.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(floor), ">", tok)).
		Then(clientv3.OpGet(floor)).
		Else(append([]clientv3.Op{clientv3.OpPut(floor, tok)}, o.marks(done)...)...).
		Commit()
	if err != nil {
		return notPermitted(writeError("settle", by.Resource, by.Token, err))
	}
	if !resp.Succeeded {
		return nil
	}
	return refusal(by.Resource, by.Token, resp)
}

// marks returns the operations that settle done, nested in transactions
// of at most maxSettleOps operations each.
func (o *Outbox) marks(done []outbox.Settled) []clientv3.Op {
	var ops []clientv3.Op
	for _, d := range outboxcodec.Unique(done) {
		e := d.Effect
		ek, pk := o.EffectKey(e.Resource, e.Token, e.Seq), o.parkedKey(e)
		if d.Parked == "" {
			ops = append(ops, clientv3.OpDelete(ek), clientv3.OpDelete(pk))
			continue
		}
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ek), ">", 0)},
			[]clientv3.Op{clientv3.OpPut(pk, outboxcodec.EncodeMarker(d.Parked, d.Attempts))}, nil))
	}
	return nest(ops)
}

// nest groups ops in unconditional nested transactions until one level
// holds fewer than maxSettleOps: etcd limits the operations of each level
// of a transaction, not of the whole.
func nest(ops []clientv3.Op) []clientv3.Op {
	for len(ops) >= maxSettleOps {
		var groups []clientv3.Op
		for chunk := range slices.Chunk(ops, maxSettleOps) {
			groups = append(groups, clientv3.OpTxn(nil, chunk, nil))
		}
		ops = groups
	}
	return ops
}
