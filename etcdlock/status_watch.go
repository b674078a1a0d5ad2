package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchStatus follows the locks, elections, semaphores and groups that
// scope chooses, and sends their [Status] on the returned channel: first
// as read, then after each change. It reads their keys once, at one
// revision, then watches them from the next revision on and rebuilds the
// Status from its own copy of the keys as the watch reports changes: a
// change costs no request. A lease that appears among the keys costs one
// request, once, for its TTL.
//
// A watch does not see a lease's keep-alives, so an Entry's TTL is here the
// lease's granted TTL, read when the lease first appeared, not the time it
// has left ([Client.Inspect] reads that); -1 when the lease was already
// gone or the read failed. A lease that expires deletes its keys, which the
// watch reports.
//
// It is one watch, of the Client's whole prefix (see statusWatch.follow):
// the role of an etcd user needs read permission on all of it, as
// docs/etcd-auth-tls.md grants. A narrower grant has the watch refused,
// and each Status after the first says so (a [PermissionError]).
//
// When the watch is interrupted (etcd compacted the revisions it needed,
// the connection or the watch stream failed or hung), WatchStatus sends the
// last Status again with Err set, reads the keys afresh, with a pause that
// grows to a second while the reads fail, and watches again from the
// revision read. Changes made during the gap are not reported one by one:
// the next Status has their result.
//
// A reader that falls behind misses no change's result but may miss the
// statuses in between: a Status waiting to be received is replaced by a
// newer one. The channel is closed when ctx ends or the Client is closed.
// WatchStatus needs no session. It fails only on a nil ctx, an invalid
// name in scope, or a closed Client ([ErrClosed]).
func (c *Client) WatchStatus(ctx context.Context, scope StatusScope) (<-chan Status, error) {
	if err := c.checkCall(ctx, "WatchStatus"); err != nil {
		return nil, err
	}
	if err := scope.validate(); err != nil {
		return nil, err
	}
	out := make(chan Status)
	w := &statusWatch{c: c, scope: scope, ranges: scope.ranges(c.keys()), out: out, ttls: leaseTTLs{}}
	if !c.followInBackground(ctx, w.follow, func() { close(out) }) {
		return nil, ErrClosed
	}
	return out, nil
}

// statusWatch is one WatchStatus call's state.
type statusWatch struct {
	// No mutex: used by the WatchStatus call's goroutine alone (follow).
	c      *Client
	scope  StatusScope
	ranges []string // the key prefixes read and watched (StatusScope.ranges)
	out    chan<- Status

	keys    map[string]*mvccpb.KeyValue // the ranges' keys: read at read, then as the watch changed them
	readRev int64                       // the revision of the read; the watch starts after it
	rev     int64                       // the revision of the latest change applied, or read
	ttls    leaseTTLs                   // the granted TTL of each lease of keys, read once per lease
	last    Status                      // built from keys, sent or not
	unsent  bool                        // last is yet to be sent
	// failing is why the last watch ended: every Status carries it until
	// a watch is in place again, so that a watch that is refused each
	// time (a role without read on the prefix) never shows as working.
	failing error
}

// follow follows the ranges until ctx ends (see follower): one watch, of
// the range that covers them all (coverOf), whose events outside the
// ranges are dropped. etcd sends the events of one revision in one
// response of one watch, so a transaction that changes two names' queues
// (LockAll's, a session's lease expiring) is applied whole. A watch per
// range would report it in two responses, and a status built between them
// would show a state no revision had.
func (w *statusWatch) follow(ctx context.Context) {
	key, end := coverOf(w.ranges)
	f := &follower{c: w.c, key: key, end: end, read: w.read, apply: w.applyAll,
		await: w.offer, ended: w.interrupted, resumed: w.resumed}
	f.follow(ctx)
}

// read reads the keys of every range at one revision, the watch's
// starting point, and builds the status, yet to be sent.
func (w *statusWatch) read(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, rangeReadTimeout)
	keys, rev, err := w.c.readRanges(rctx, w.ranges)
	cancel()
	if err != nil {
		return 0, err
	}
	w.keys, w.readRev, w.rev = keys, rev, rev
	// A lease gone, or whose read failed, is read again, once per read:
	// its keys may have outlived the gap.
	maps.DeleteFunc(w.ttls, func(_ clientv3.LeaseID, ttl time.Duration) bool { return ttl < 0 })
	w.build(ctx)
	w.unsent = true
	return rev, nil
}

// offer offers the last status, if unsent, to the reader while it waits
// for the watch's note: a reader that falls behind gets the newest.
func (w *statusWatch) offer(ctx context.Context, note <-chan struct{}) error {
	for {
		var out chan<- Status
		if w.unsent {
			out = w.out
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case out <- w.last:
			w.unsent = false
		case <-note:
			return nil
		}
	}
}

// applyAll applies evs and rebuilds the status if any was in the ranges.
func (w *statusWatch) applyAll(ctx context.Context, evs []*mvccpb.Event) error {
	if w.apply(evs) {
		w.build(ctx)
		w.unsent = true
	}
	return nil
}

// interrupted sends the last status again, saying why the watch, or the
// read before it, failed; every status carries that until resumed.
func (w *statusWatch) interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !errors.Is(err, errWatchEnded) {
		err = fmt.Errorf("etcdlock: WatchStatus: %w", err)
	}
	w.failing, w.last.Err = err, err
	if !w.send(ctx) {
		return ctx.Err()
	}
	w.unsent = false
	return nil
}

// resumed clears the failure once a watch is in place again, and offers
// the status without it.
func (w *statusWatch) resumed() {
	w.failing, w.last.Err = nil, nil
	w.unsent = true
}

// apply updates the keys with evs, events of the watch, in revision
// order, dropping those of keys outside the ranges, and reports whether
// any was in them.
func (w *statusWatch) apply(evs []*mvccpb.Event) bool {
	in := false
	for _, ev := range evs {
		if !inRanges(w.ranges, string(ev.Kv.Key)) {
			continue
		}
		in = true
		applyEvent(w.keys, w.readRev, ev)
		w.rev = max(w.rev, ev.Kv.ModRevision) // a deletion's is its revision
	}
	return in
}

// coverOf returns the smallest prefix range [key, end) that holds every
// prefix of ranges: the one watch of them all.
func coverOf(ranges []string) (key, end string) {
	p := ranges[0]
	for _, r := range ranges[1:] {
		n := 0
		for n < len(p) && n < len(r) && p[n] == r[n] {
			n++
		}
		p = p[:n]
	}
	if p == "" {
		return "\x00", "\x00" // every key
	}
	return p, clientv3.GetPrefixRangeEnd(p)
}

// inRanges reports whether key is under one of the prefixes of ranges.
func inRanges(ranges []string, key string) bool {
	for _, r := range ranges {
		if strings.HasPrefix(key, r) {
			return true
		}
	}
	return false
}

// maxCachedTTLs bounds the granted TTLs a watch remembers of leases that
// no key has any more: past it, those are forgotten.
const maxCachedTTLs = 4096

// build rebuilds the last status from the keys, having read the TTL of
// each lease that is new among them. A lease's granted TTL does not
// change, so it is remembered when the lease's keys go: a session that
// takes and releases a lock again and again costs one read, not one per
// hold.
func (w *statusWatch) build(ctx context.Context) {
	live := map[clientv3.LeaseID]bool{}
	for _, kv := range w.keys {
		id := clientv3.LeaseID(kv.Lease)
		if id == clientv3.NoLease {
			continue
		}
		live[id] = true
		if _, ok := w.ttls[id]; !ok {
			w.ttls[id] = w.c.grantedTTL(ctx, id)
		}
	}
	// A lease whose read failed is read again when it next appears; past
	// the bound, every lease without keys is forgotten.
	over := len(w.ttls) > maxCachedTTLs
	maps.DeleteFunc(w.ttls, func(id clientv3.LeaseID, ttl time.Duration) bool {
		return !live[id] && (ttl < 0 || over)
	})
	w.last = w.c.keys().statusOf(w.scope, w.keys, w.rev, w.ttls)
	w.last.Err = w.failing
}

// send sends the last status; false when ctx ended first.
func (w *statusWatch) send(ctx context.Context) bool {
	select {
	case w.out <- w.last:
		return true
	case <-ctx.Done():
		return false
	}
}

// WatchStatus's reads time out, so that a connection that fails while it
// reads holds up the status no longer: a read of the keys is tried again
// (Status.Err says why it failed), a lease's TTL shows as -1.
const (
	rangeReadTimeout = 10 * time.Second
	leaseReadTimeout = 5 * time.Second
)

// grantedTTL reads the granted TTL of lease id; -1 when it is gone or the
// read fails.
func (c *Client) grantedTTL(ctx context.Context, id clientv3.LeaseID) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, leaseReadTimeout)
	defer cancel()
	resp, err := c.cli.TimeToLive(ctx, id)
	if err != nil || resp.TTL < 0 {
		return -1
	}
	return time.Duration(resp.GrantedTTL) * time.Second
}

// maxReadOps is how many ranges one transaction of readRanges reads, below
// etcd's default limit of operations per transaction (--max-txn-ops, 128).
const maxReadOps = 64

// readRanges reads the keys under each prefix of ranges at one revision,
// by key, and returns that revision: one transaction per maxReadOps
// ranges, the later ones at the first one's revision.
func (c *Client) readRanges(ctx context.Context, ranges []string) (map[string]*mvccpb.KeyValue, int64, error) {
	keys := map[string]*mvccpb.KeyValue{}
	var rev int64
	for i := 0; i < len(ranges); i += maxReadOps {
		ops := make([]clientv3.Op, 0, maxReadOps)
		for _, r := range ranges[i:min(i+maxReadOps, len(ranges))] {
			ops = append(ops, clientv3.OpGet(r, clientv3.WithPrefix(), clientv3.WithRev(rev)))
		}
		resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				keys[string(kv.Key)] = kv
			}
		}
	}
	return keys, rev, nil
}
