package redisfence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence/outbox"
)

// Watch returns a channel that receives a value (coalesced: capacity
// one, sent without blocking) after an effect in scope was recorded or
// requeued ([outbox.Watcher]): it subscribes to the channel the scripts
// publish each effect's resource on, and returns once Redis confirmed the
// subscription, so an effect recorded after Watch returns is not missed.
// The channel is closed when ctx ends or the subscription breaks (a
// broken connection; Redis's pub/sub is not persistent: a message sent
// while no subscription is in place is lost, and the dispatcher polls);
// the goroutine feeding it ends with it. Watch fails with an error
// matching [ErrInvalidArgument] when the Store's client cannot subscribe
// (a *redis.Client and a *redis.ClusterClient can), and returns the
// subscription's error as it is.
func (o *Outbox) Watch(ctx context.Context, scope outbox.Scope) (<-chan struct{}, error) {
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	sub, ok := o.store.c.(subscriber)
	if !ok {
		return nil, fmt.Errorf("%w: Outbox.Watch: the Store's client (%T) cannot subscribe", ErrInvalidArgument, o.store.c)
	}
	ps := sub.Subscribe(ctx, o.key(chanWake))
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		ps.Close()
		return nil, fmt.Errorf("redisfence: watching the outbox under %q: %w", o.prefix, err)
	}
	out := make(chan struct{}, 1)
	// ReceiveMessage does not return when ctx ends; closing ps ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	go func() {
		defer close(out)
		defer stop()
		defer ps.Close()
		for {
			msg, err := ps.ReceiveMessage(context.WithoutCancel(ctx))
			if err != nil {
				return
			}
			if scope.Has(msg.Payload) {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}
