package etcdlock

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// waitTurn blocks until fewer of t's blockers than t.need were created
// before rev (ours), starting from preds, the nearest of them, and returns
// the revision of the read that found the turn come.
//
// A watch that ends without telling anything (etcd refused or ended it, or
// its stream ended) is followed by a read of the queue after a pause that
// doubles up to maxWatchBackoff, so a waiter sends a few requests a second
// at most while watches keep failing. A read of the queue that fails for
// want of a leader is read again after the same pause (see
// readPredecessor). The read that follows a blocker's deletion carries
// t's second key's optimistic claim, if t has one; a read that finds the
// turn not come has it give back what it took (secondKey.notYet).
func (c *Client) waitTurn(ctx context.Context, s *session, t *ticket, rev int64, preds []*mvccpb.KeyValue) (int64, error) {
	backoff := watchBackoff()
	at := rev
	for len(preds) >= t.need() {
		gone, err := c.waitDeleted(ctx, s, t, preds)
		var ended *watchEndedError
		switch {
		case errors.As(err, &ended):
			if permanent(ended.reason) {
				return 0, ended.reason
			}
			if err := s.pause(ctx, &backoff); err != nil {
				return 0, err
			}
		case err != nil:
			return 0, err
		case gone:
			backoff.reset()
		}
		if preds, at, err = c.readPredecessors(ctx, s, t, rev, gone, &backoff); err != nil {
			return 0, err
		}
		if len(preds) >= t.need() && t.second != nil {
			if err := t.second.notYet(ctx, c.turn(s, t, rev, 0), c.secondCalls(s, t)); err != nil {
				return 0, err
			}
		}
	}
	return at, nil
}

// readPredecessors is predecessors, read again after a pause (see session.pause) while
// it fails with codes.Unavailable: the member has no leader, lost it during
// the read ("leader changed"), timed out, or went away. That is when a
// watch ends early too (a member without a leader ends the streams opened
// WithRequireLeader), and clientv3 does not retry a Txn itself; the read
// changes nothing, and a waiter must not give up its place in the queue
// for a failure that passes. ctx and the session bound the retries. (An
// optimistic claim sent with it is sent again, and each is decisive: see
// secondKey.read.)
func (c *Client) readPredecessors(ctx context.Context, s *session, t *ticket, rev int64, claim bool, backoff *backoff) ([]*mvccpb.KeyValue, int64, error) {
	for {
		preds, at, err := c.predecessors(ctx, s, t, rev, claim)
		if !unavailable(err) {
			return preds, at, err
		}
		if err := s.pause(ctx, backoff); err != nil {
			return nil, 0, err
		}
	}
}

// unavailable reports whether a request failed with codes.Unavailable,
// which etcd and gRPC use for failures that pass (no leader, leader
// changed, request timed out, connection lost), as clientv3's own retry
// rule for reads does.
func unavailable(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// pause waits out b, or less if ctx ends or the session does (its cause).
func (s *session) pause(ctx context.Context, b *backoff) error {
	if err := b.wait(ctx, s.done); err != errStopped {
		return err
	}
	return sessionCause(s.Err())
}

// predecessors returns the t.need blockers queued nearest before ours (or
// all, when fewer), and the revision it read them at, and checks in the
// same linearizable read that our own key still exists: a waiter whose
// lease expired, or whose key was deleted, must never be handed the lock,
// also when its view of the queue (the watch event that woke it) lags.
// With claim, t's second key (if any) claims optimistically in the same
// transaction (see secondKey.read).
func (c *Client) predecessors(ctx context.Context, s *session, t *ticket, rev int64, claim bool) ([]*mvccpb.KeyValue, int64, error) {
	ctx, cancel := t.request(ctx)
	defer cancel()
	var tn *turn
	if claim && t.second != nil {
		optimistic := c.turn(s, t, rev, 0)
		tn = &optimistic
	}
	ops, second := t.readSecond([]clientv3.Op{t.blockers(newestFirst, withLimit(t.need()), clientv3.WithMaxCreateRev(rev-1))}, tn)
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", rev)).
		Then(ops...).
		Commit()
	if err != nil {
		return nil, 0, err
	}
	if !resp.Succeeded {
		return nil, 0, c.lostWhileWaiting(s)
	}
	t.sawSecond(resp, second, 0)
	return resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision, nil
}

// waitDeleted returns once one of the keys preds is gone (true), or a
// watch ended early (a *watchEndedError: the caller reads the queue
// again). It watches on the Client's stream (see watcher) from the current
// revision (a watch from an old revision is "unsynced", and etcd only
// catches those up every 100 ms) and, once the watches are in place, reads
// preds again so that a deletion just before them is not missed.
func (c *Client) waitDeleted(ctx context.Context, s *session, t *ticket, preds []*mvccpb.KeyValue) (bool, error) {
	ws := make([]watch, len(preds))
	for i, kv := range preds {
		ws[i] = watch{key: string(kv.Key)}
	}
	b := newWatchBox(ws...)
	b.add(ctx, c.watches, 0)
	defer b.remove(c.watches)
	created := 0
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-s.done:
			return false, c.lostWhileWaiting(s)
		case <-b.note:
		}
		n := b.take()
		switch created += n.created; {
		case n.deleted:
			return true, nil
		case n.ended:
			return false, &watchEndedError{reason: n.reason}
		case n.created > 0 && created == len(preds):
			if gone, err := c.anyGone(ctx, t, preds); gone || err != nil {
				return gone, err
			}
		}
	}
}

// anyGone reads the keys preds again: whether one of them is gone. One
// key (a lock's, a term's predecessor) is read with a plain range
// request, which costs etcd less than a transaction; several (a
// semaphore's) in one transaction.
func (c *Client) anyGone(ctx context.Context, t *ticket, preds []*mvccpb.KeyValue) (bool, error) {
	ctx, cancel := t.request(ctx)
	defer cancel()
	if len(preds) == 1 {
		resp, err := c.cli.Get(ctx, string(preds[0].Key), clientv3.WithKeysOnly())
		if err != nil {
			return false, err
		}
		return len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != preds[0].CreateRevision, nil
	}
	ops := make([]clientv3.Op, len(preds))
	for i, kv := range preds {
		ops[i] = clientv3.OpGet(string(kv.Key), clientv3.WithKeysOnly())
	}
	resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	for i, kv := range preds {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision != kv.CreateRevision {
			return true, nil
		}
	}
	return false, nil
}

// watchEndedError means a watch closed early (no leader, compaction,
// refused); the caller reads the queue again rather than trusting it.
type watchEndedError struct{ reason error } // etcd's, if it gave one

func (e *watchEndedError) Error() string {
	if e.reason == nil {
		return "watch ended"
	}
	return "watch ended: " + e.reason.Error()
}

func (c *Client) lostWhileWaiting(s *session) error {
	if err := s.Err(); err != nil {
		return sessionCause(err)
	}
	return lost(ErrKeyDeleted)
}

// waitRange waits until a key under prefix dir is deleted after revision
// from, or the watch ends (the caller reads again either way).
func (c *Client) waitRange(ctx context.Context, s *session, dir string, from int64) error {
	b := newWatchBox(watch{key: dir, end: clientv3.GetPrefixRangeEnd(dir)})
	b.add(ctx, c.watches, from)
	defer b.remove(c.watches)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return c.lostWhileWaiting(s)
		case <-b.note:
		}
		if b.take().ended {
			return nil
		}
	}
}
