package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Observe watches the election called name and sends its leader on the
// returned channel each time it changes or proclaims a new value: first the
// current leader (if any), then every later one, in increasing token order.
// An older leader, or an older value of a leader, is never sent after a
// newer one; an Entry with the same Token as the previous one carries a
// value proclaimed since. While the watch runs, every term is sent, even
// one that lasts a single revision; when the watch is interrupted
// (reconnection, compaction, a member without a leader), Observe reads the
// election afresh and goes on from there, so terms that began and ended
// during the gap are skipped. The Entries' TTL is -1 (not read).
//
// A leader sent is what [Client.Leader] would return at that revision: the
// candidate entitled to lead, which may be one whose Campaign gave up as
// its turn came, reported until its cleanup delete lands (see
// [Client.Leader]).
//
// The channel is closed when ctx ends or the Client is closed. Observe
// sends one Entry at a time: a reader that falls behind delays the next
// one, it loses none. It fails only on a nil ctx, an invalid name, or a
// closed Client ([ErrClosed]).
func (c *Client) Observe(ctx context.Context, name string) (<-chan Entry, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: Observe: nil context", ErrInvalidArgument)
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	out := make(chan Entry)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	started := c.background(func() {
		defer close(out)
		defer cancel()
		defer stop()
		o := observer{c: c, q: c.electionQueue(name), out: out}
		o.run(ctx)
	})
	if !started {
		stop()
		cancel()
		return nil, ErrClosed
	}
	return out, nil
}

// observer is one Observe call's state.
type observer struct {
	c    *Client
	q    string
	out  chan<- Entry
	last Entry // last sent
	ws   watchStream
	keys map[string]*mvccpb.KeyValue // the election's queue as of rev
	rev  int64
}

// run watches until ctx ends, starting over after each interruption with a
// pause that doubles from 10 ms to 1 s (reset by a watch that lasted).
func (o *observer) run(ctx context.Context) {
	backoff := minWatchBackoff
	for ctx.Err() == nil {
		start := time.Now()
		err := o.watch(ctx)
		switch {
		case permanent(err):
			// A missing permission: keep trying (the role may be fixed),
			// slowly.
			backoff = maxWatchBackoff
		case errors.Is(err, errWatchHung):
			// Should the next stream hang too, the leader is still read
			// once per hung watch.
			o.read(ctx)
		}
		retryPause(ctx, start, &backoff)
	}
}

// watch opens a watch on the queue from the current revision (so it is
// synced, not caught up every 100 ms), then reads the queue, sends its
// leader, and applies each event after the read, sending every new leader.
// It returns when the watch ends.
func (o *observer) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(o.ws.context(clientv3.WithRequireLeader(ctx)))
	defer cancel()
	wch := o.c.cli.Watch(wctx, o.q, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	// A watch stream can hang while the connection works: every third of
	// the TTL the observer asks etcd for a progress notification, and a
	// watch that has sent nothing (not even its creation) by the next ask
	// is ended; the next one goes on a new stream, and run reads the queue
	// meanwhile (read).
	every := max(o.c.o.ttl/3, minProbeInterval)
	created := time.NewTimer(2 * every)
	select {
	case <-ctx.Done():
		created.Stop()
		return ctx.Err()
	case <-created.C:
		o.ws.renew(o.c)
		return errWatchHung
	case wr, ok := <-wch:
		created.Stop()
		if err := o.handle(ctx, wr, ok, nil); err != nil {
			return err
		}
	}
	if err := o.read(ctx); err != nil {
		return err
	}
	probe := time.NewTicker(every)
	defer probe.Stop()
	asked := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-probe.C:
			if asked {
				o.ws.renew(o.c)
				return errWatchHung
			}
			if err := o.c.cli.RequestProgress(wctx); err != nil {
				return err
			}
			asked = true
		case wr, ok := <-wch:
			asked = false
			if err := o.handle(ctx, wr, ok, o.apply); err != nil {
				return err
			}
		}
	}
}

// read reads the queue and sends its leader, if newer than the last sent.
func (o *observer) read(ctx context.Context) error {
	resp, err := o.c.cli.Get(ctx, o.q, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	o.rev = resp.Header.Revision
	o.keys = make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		o.keys[string(kv.Key)] = kv
	}
	if !o.send(ctx) {
		return ctx.Err()
	}
	return nil
}

// errWatchHung ends a watch that sent nothing, not even the progress
// notification asked for, for a probe interval.
var errWatchHung = errors.New("etcdlock: watch sent nothing for a probe interval")

// handle passes each event of one watch response to f; an error if the
// watch ended.
func (o *observer) handle(ctx context.Context, wr clientv3.WatchResponse, ok bool, f func(context.Context, *clientv3.Event) bool) error {
	if !ok || wr.Canceled || wr.Err() != nil {
		err := refusal(wr.Err())
		if rerr := o.ws.refused(o.c, wr.Err()); rerr != nil {
			return rerr
		}
		if err == nil {
			err = errors.New("watch ended")
		}
		return err
	}
	if f == nil {
		return nil
	}
	for _, ev := range wr.Events {
		if !f(ctx, ev) {
			return ctx.Err()
		}
	}
	return nil
}

// apply updates the queue with ev, unless the read already reflects it, and
// sends the leader; false when ctx ended.
func (o *observer) apply(ctx context.Context, ev *clientv3.Event) bool {
	if ev.Kv.ModRevision <= o.rev {
		return true
	}
	if ev.Type == mvccpb.DELETE {
		delete(o.keys, string(ev.Kv.Key))
	} else {
		o.keys[string(ev.Kv.Key)] = ev.Kv
	}
	return o.send(ctx)
}

// send sends the queue's leader if it is newer than the last one sent;
// false when ctx ended first.
func (o *observer) send(ctx context.Context) bool {
	var first *mvccpb.KeyValue
	for _, kv := range o.keys {
		if first == nil || kv.CreateRevision < first.CreateRevision {
			first = kv
		}
	}
	if first == nil {
		return true
	}
	e := entryOf(first)
	if e.Token < o.last.Token || e.Token == o.last.Token && e.Rev <= o.last.Rev {
		return true
	}
	select {
	case o.out <- e:
		if e.Token != o.last.Token {
			o.c.tel.leaderChanges.Add(ctx, 1)
		}
		o.last = e
		return true
	case <-ctx.Done():
		return false
	}
}
