package etcdfence

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence/outbox"
)

// Watch returns a channel that receives a value (coalesced: capacity
// one, sent without blocking) after an effect in scope was recorded
// ([outbox.Watcher]). It reads the current revision and watches the
// effect keys from the next one, so an effect recorded after Watch
// returns is not missed even before etcd has set the watch up. The
// channel is closed when ctx ends, when the watch breaks (the member
// loses its leader, the revision is compacted, the connection closes),
// and the goroutine that feeds it ends with it. Watch fails with an
// error matching [ErrInvalidArgument] when the Outbox has no watcher
// ([WithWatcher]), and returns the read's error as it is.
func (o *Outbox) Watch(ctx context.Context, scope outbox.Scope) (<-chan struct{}, error) {
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if o.watcher == nil {
		return nil, fmt.Errorf("%w: Outbox.Watch: no watcher: the Store's KV is no clientv3.Watcher; use WithWatcher", ErrInvalidArgument)
	}
	resp, err := o.store.kv.Get(ctx, o.prefix+effectSpace, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdfence: watching the outbox under %q: %w", o.prefix, err)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := o.watcher.Watch(wctx, o.prefix+effectSpace, clientv3.WithPrefix(),
		clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterDelete())
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer cancel()
		o.forward(wch, scope, out)
	}()
	return out, nil
}

// forward sends on out, without blocking, for each effect in scope that
// wch reports, until wch closes or breaks.
func (o *Outbox) forward(wch clientv3.WatchChan, scope outbox.Scope, out chan<- struct{}) {
	for resp := range wch {
		if resp.Canceled || resp.Err() != nil {
			return
		}
		for _, ev := range resp.Events {
			s, err := decodeEffect(string(ev.Kv.Key), ev.Kv.ModRevision, ev.Kv.Value)
			if err != nil || !scope.Has(s.e.Resource) {
				continue
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}
}
