package etcdlock

import (
	"context"
	"errors"
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
	if err := c.checkCall(ctx, "Observe"); err != nil {
		return nil, err
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	out := make(chan Entry)
	o := &observer{c: c, q: c.keys().electionQueue(name), out: out}
	if !c.followInBackground(ctx, o.follow, func() { close(out) }) {
		return nil, ErrClosed
	}
	return out, nil
}

// followInBackground runs follow in the Client's background until ctx
// ends or the Client is closed, whichever comes first, then runs done
// (closing the caller's channel). It reports false, having run nothing,
// when the Client is closed.
func (c *Client) followInBackground(ctx context.Context, follow func(context.Context), done func()) bool {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	started := c.background(func() {
		defer done()
		defer cancel()
		defer stop()
		follow(ctx)
	})
	if !started {
		stop()
		cancel()
	}
	return started
}

// observer is one Observe call's state.
type observer struct {
	// No mutex: used by the Observe call's goroutine alone (follow).
	c    *Client
	q    string
	out  chan<- Entry
	last Entry                       // last sent
	keys map[string]*mvccpb.KeyValue // the election's queue as of rev
	rev  int64
}

// follow watches until ctx ends, starting over after each interruption with a
// pause that doubles from 10 ms to 1 s (reset by a watch that lasted). It
// reads the queue after each interruption too, also when the watch had
// read it when it was created: a watch that ended (a hung stream above
// all) may have withheld events, and should every new stream hang, the
// leader is still read once per hung stream found.
func (o *observer) follow(ctx context.Context) {
	backoff := watchBackoff()
	for ctx.Err() == nil {
		start := time.Now()
		err := o.watch(ctx)
		if permanent(err) {
			// A missing permission: keep trying (the role may be fixed),
			// slowly.
			backoff.d = backoff.max
		} else if ctx.Err() == nil {
			o.read(ctx)
		}
		backoff.resetIfLasted(start)
		backoff.wait(ctx, nil)
	}
}

// watch watches the queue on the Client's stream (see watcher) from the
// current revision (so it is synced, not caught up every 100 ms); once the
// watch is in place it reads the queue, sends its leader, and applies each
// event after the read, sending every new leader. It returns when the
// watch ends: with etcd's reason, if it gave one.
func (o *observer) watch(ctx context.Context) error {
	b := newWatchBox(watch{key: o.q, end: clientv3.GetPrefixRangeEnd(o.q), all: true})
	b.add(ctx, o.c.watches, 0)
	defer b.remove(o.c.watches)
	read := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.note:
		}
		n := b.take()
		if n.created > 0 && !read {
			if err := o.read(ctx); err != nil {
				return err
			}
			read = true
		}
		if read && !o.applyAll(ctx, n.events) {
			return ctx.Err()
		}
		if n.ended {
			if n.reason == nil {
				return errWatchEnded
			}
			return n.reason
		}
	}
}

// read reads the queue and sends its leader, if newer than the last sent.
func (o *observer) read(ctx context.Context) error {
	keys, rev, err := o.c.readRange(ctx, o.q)
	if err != nil {
		return err
	}
	o.keys, o.rev = keys, rev
	if !o.send(ctx) {
		return ctx.Err()
	}
	return nil
}

// errWatchEnded ends a watch that etcd or its stream ended without saying
// why.
var errWatchEnded = errors.New("etcdlock: watch ended")

// applyAll updates the queue with evs, in revision order, and sends the
// leader after each revision, not after each event: one revision may
// delete several candidates (a lease's end deletes all of a session's), and
// a candidate between two of them never led. A response, and so a take,
// carries a revision's events whole. False when ctx ended.
func (o *observer) applyAll(ctx context.Context, evs []*mvccpb.Event) bool {
	for i, ev := range evs {
		o.apply(ev)
		if i+1 < len(evs) && evs[i+1].Kv.ModRevision == ev.Kv.ModRevision {
			continue
		}
		if !o.send(ctx) {
			return false
		}
	}
	return true
}

// apply updates the queue with ev (see applyEvent).
func (o *observer) apply(ev *mvccpb.Event) { applyEvent(o.keys, o.rev, ev) }

// readRange reads the keys under prefix q, by key, and the revision of the
// read: what a watch of q then applies its events to (applyEvent).
func (c *Client) readRange(ctx context.Context, q string) (map[string]*mvccpb.KeyValue, int64, error) {
	resp, err := c.cli.Get(ctx, q, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	keys := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv
	}
	return keys, resp.Header.Revision, nil
}

// applyEvent updates keys, a range read at revision rev, with ev, an event
// of a watch of that range, unless the read already reflects it.
func applyEvent(keys map[string]*mvccpb.KeyValue, rev int64, ev *mvccpb.Event) {
	if ev.Kv.ModRevision <= rev {
		return
	}
	if ev.Type == mvccpb.DELETE {
		delete(keys, string(ev.Kv.Key))
	} else {
		keys[string(ev.Kv.Key)] = ev.Kv
	}
}

// send sends the queue's leader if it is newer than the last one sent;
// false when ctx ended first.
func (o *observer) send(ctx context.Context) bool {
	// The leader is the one key entitled (see entitled) in an election's
	// queue: it has no readers and need 1, so that is the oldest key. Found
	// by one pass, not by sorting the queue on every event.
	var first *mvccpb.KeyValue
	for _, kv := range o.keys {
		if first == nil || kv.CreateRevision < first.CreateRevision {
			first = kv
		}
	}
	if first == nil {
		return true // no candidate
	}
	e := entryOf(first)
	if e.Token < o.last.Token || e.Token == o.last.Token && e.Rev <= o.last.Rev {
		return true
	}
	if e.Token != o.last.Token {
		// Counted before it is delivered, so that a reader of the metric
		// who has received the leader finds it counted.
		o.c.tel.leaderChanges.Add(ctx, 1)
	}
	select {
	case o.out <- e:
		o.last = e
		return true
	case <-ctx.Done():
		return false
	}
}
