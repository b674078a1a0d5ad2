package etcdfence

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// Parked returns up to limit parked effects in scope, in recording order,
// with the reason and attempts their dispatcher settled them with
// ([outbox.Requeuer]). Its arguments and errors are [Outbox.Pending]'s.
func (o *Outbox) Parked(ctx context.Context, scope outbox.Scope, limit int) ([]outbox.Parked, error) {
	if err := o.checkList(ctx, scope, limit); err != nil {
		return nil, err
	}
	effects, parked, err := o.readAll(ctx)
	if err != nil {
		return nil, err
	}
	var out []outbox.Parked
	for _, s := range effects {
		if len(out) == limit {
			break
		}
		m, ok := parked[s.e.Key()]
		if !ok || !scope.Has(s.e.Resource) {
			continue
		}
		reason, attempts, err := decodeMarker(o.parkedKey(s.e), m)
		if err != nil {
			return nil, err
		}
		out = append(out, outbox.Parked{Effect: s.e, Reason: reason, Attempts: attempts})
	}
	return out, nil
}

// Requeue makes the parked effect e pending again, at its place in its
// resource's order (its key was never moved: only its marker is
// deleted), in one transaction. An effect that is not parked, or no
// longer recorded, gets an error matching [fence.ErrNotFound] and nothing
// changes. It refuses an empty Resource, an invalid Token and a negative Seq
// before any I/O (only they name the effect). When etcd gives no
// answer the error matches [fence.ErrUnknownOutcome]; when it denies the
// user permission, [outbox.ErrNotPermitted]. ctx bounds the request.
func (o *Outbox) Requeue(ctx context.Context, e outbox.Effect) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := outboxcodec.CheckRequeue(ctx, e, ErrInvalidArgument); err != nil {
		return err
	}
	ek, pk := o.EffectKey(e.Resource, e.Token, e.Seq), o.parkedKey(e)
	resp, err := o.store.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ek), ">", 0), clientv3.Compare(clientv3.CreateRevision(pk), ">", 0)).
		Then(clientv3.OpDelete(pk)).
		Commit()
	if err != nil {
		return notPermitted(writeError("requeue", e.Resource, e.Token, err))
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcdfence: effect %s on %q is not parked", fence.ErrNotFound, e.Key(), e.Resource)
	}
	return nil
}
