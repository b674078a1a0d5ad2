package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// waitTurn blocks until no key in t's queue was created before rev (ours),
// starting from pred, the key queued just before ours.
//
// A watch that ends without telling anything (etcd refused or ended it, or
// its stream ended) is followed by a read of the queue after a pause that
// doubles up to maxWatchBackoff, so a waiter sends a few requests a second
// at most while watches keep failing. A read of the queue that fails for
// want of a leader is read again after the same pause (see
// readPredecessor).
func (c *Client) waitTurn(ctx context.Context, s *session, t *ticket, rev int64, pred *mvccpb.KeyValue) error {
	backoff := watchBackoff()
	for pred != nil {
		gone, err := c.waitDeleted(ctx, s, pred)
		var ended *watchEndedError
		switch {
		case errors.As(err, &ended):
			if permanent(ended.reason) {
				return ended.reason
			}
			if err := s.pause(ctx, &backoff); err != nil {
				return err
			}
		case err != nil:
			return err
		case gone:
			backoff.reset()
		}
		if pred, err = c.readPredecessor(ctx, s, t, rev, &backoff); err != nil {
			return err
		}
	}
	return nil
}

// readPredecessor is predecessor, read again after a pause (see session.pause) while
// it fails with codes.Unavailable: the member has no leader, lost it during
// the read ("leader changed"), timed out, or went away. That is when a
// watch ends early too (a member without a leader ends the streams opened
// WithRequireLeader), and clientv3 does not retry a Txn itself; the read
// changes nothing, and a waiter must not give up its place in the queue
// for a failure that passes. ctx and the session bound the retries.
func (c *Client) readPredecessor(ctx context.Context, s *session, t *ticket, rev int64, backoff *backoff) (*mvccpb.KeyValue, error) {
	for {
		pred, err := c.predecessor(ctx, s, t, rev)
		if !unavailable(err) {
			return pred, err
		}
		if err := s.pause(ctx, backoff); err != nil {
			return nil, err
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

const (
	minWatchBackoff = 10 * time.Millisecond
	maxWatchBackoff = time.Second
)

// watchBackoff is the pause between the attempts of a watch loop.
func watchBackoff() backoff { return backoff{min: minWatchBackoff, max: maxWatchBackoff} }

// pause waits out b, or less if ctx ends or the session does (its cause).
func (s *session) pause(ctx context.Context, b *backoff) error {
	if err := b.wait(ctx, s.done); err != errStopped {
		return err
	}
	return sessionCause(s.Err())
}

// predecessor returns the key queued just before ours, or nil, and checks in
// the same linearizable read that our own key still exists: a waiter whose
// lease expired, or whose key was deleted, must never be handed the lock,
// also when its view of the queue (the watch event that woke it) lags.
func (c *Client) predecessor(ctx context.Context, s *session, t *ticket, rev int64) (*mvccpb.KeyValue, error) {
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", rev)).
		Then(t.blockers(clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1),
			clientv3.WithMaxCreateRev(rev-1))).
		Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, c.lostWhileWaiting(s)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		return kvs[0], nil
	}
	return nil, nil
}

// waitDeleted returns once the key pred is gone (true), or its watch ended
// early (a *watchEndedError: the caller reads the queue again). It watches
// on the Client's stream (see watcher) from the current revision (a watch
// from an old revision is "unsynced", and etcd only catches those up every
// 100 ms) and, once the watch is in place, reads pred again so that a
// deletion just before the watch is not missed.
func (c *Client) waitDeleted(ctx context.Context, s *session, pred *mvccpb.KeyValue) (bool, error) {
	b := newWatchBox(watch{key: string(pred.Key)})
	c.watches.add(ctx, &b.w, 0)
	defer c.watches.remove(&b.w)
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-s.done:
			return false, c.lostWhileWaiting(s)
		case <-b.note:
		}
		switch n := b.take(); {
		case n.deleted:
			return true, nil
		case n.ended:
			return false, &watchEndedError{reason: n.reason}
		case n.created:
			resp, err := c.cli.Get(ctx, string(pred.Key))
			if err != nil {
				return false, err
			}
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != pred.CreateRevision {
				return true, nil
			}
		}
	}
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
