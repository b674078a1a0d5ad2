package etcdlock

import (
	"context"

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

// follow follows the election's queue until ctx ends (see follower):
// each round reads the queue and sends its leader, then sends every new
// leader the watch's events make. A round's read comes after each
// interruption, so should every new stream hang, the leader is still read
// once per hung stream found.
func (o *observer) follow(ctx context.Context) {
	f := &follower{c: o.c, key: o.q, end: clientv3.GetPrefixRangeEnd(o.q), read: o.read, apply: o.applyAll}
	f.follow(ctx)
}

// read reads the queue and sends its leader, if newer than the last sent.
func (o *observer) read(ctx context.Context) (int64, error) {
	keys, rev, err := o.c.readRange(ctx, o.q)
	if err != nil {
		return 0, err
	}
	o.keys, o.rev = keys, rev
	if !o.send(ctx) {
		return 0, ctx.Err()
	}
	return rev, nil
}

// applyAll updates the queue with evs, in revision order, and sends the
// leader after each revision, not after each event: one revision may
// delete several candidates (a lease's end deletes all of a session's), and
// a candidate between two of them never led. A response, and so a take,
// carries a revision's events whole. It fails only when ctx ends.
func (o *observer) applyAll(ctx context.Context, evs []*mvccpb.Event) error {
	for i, ev := range evs {
		o.apply(ev)
		if i+1 < len(evs) && evs[i+1].Kv.ModRevision == ev.Kv.ModRevision {
			continue
		}
		if !o.send(ctx) {
			return ctx.Err()
		}
	}
	return nil
}

// apply updates the queue with ev (see applyEvent).
func (o *observer) apply(ev *mvccpb.Event) { applyEvent(o.keys, o.rev, ev) }

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
