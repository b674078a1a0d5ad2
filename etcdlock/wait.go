package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitTurn blocks until no key in t's queue was created before rev (ours),
// starting from pred, the key queued just before ours.
//
// A watch that ends without telling anything (etcd refused it: an expired
// auth token on the watch stream, no leader) is followed by a pause that
// doubles up to maxWatchBackoff, so a waiter sends a few requests a second
// at most while watches keep failing.
func (c *Client) waitTurn(ctx context.Context, s *session, t *ticket, rev int64, pred *mvccpb.KeyValue) error {
	backoff := minWatchBackoff
	for pred != nil {
		gone, err := c.waitDeleted(ctx, s, string(pred.Key), pred.CreateRevision)
		if err != nil {
			return err
		}
		if gone {
			backoff = minWatchBackoff
		} else if err := pause(ctx, s, &backoff); err != nil {
			return err
		}
		if pred, err = c.predecessor(ctx, s, t, rev); err != nil {
			return err
		}
	}
	return nil
}

const (
	minWatchBackoff = 10 * time.Millisecond
	maxWatchBackoff = time.Second
)

// pause waits *d (or less if ctx ends or the session does) and doubles it.
func pause(ctx context.Context, s *session, d *time.Duration) error {
	t := time.NewTimer(*d)
	defer t.Stop()
	*d = min(2**d, maxWatchBackoff)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return sessionCause(s.Err())
	case <-t.C:
		return nil
	}
}

// predecessor returns the key queued just before ours, or nil, and checks in
// the same linearizable read that our own key still exists: a waiter whose
// lease expired, or whose key was deleted, must never be handed the lock,
// also when its view of the queue (the watch event that woke it) lags.
func (c *Client) predecessor(ctx context.Context, s *session, t *ticket, rev int64) (*mvccpb.KeyValue, error) {
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", rev)).
		Then(clientv3.OpGet(t.q, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)).
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

// waitDeleted returns once the key pred, created at predRev, is gone (true),
// or the watch on it ended early (false: the caller reads the queue again).
// It watches from the current revision (a watcher from an old revision is
// "unsynced", and etcd only catches those up every 100 ms) and, once the
// watch is established, re-reads pred so that a deletion just before the
// watch is not missed.
func (c *Client) waitDeleted(ctx context.Context, s *session, pred string, predRev int64) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.cli.Watch(wctx, pred, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	if _, err := c.nextWatch(ctx, s, wch); err != nil {
		return false, ctxErrOr(ctx, err)
	}
	resp, err := c.cli.Get(ctx, pred)
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != predRev {
		return true, nil
	}
	for {
		wr, err := c.nextWatch(ctx, s, wch)
		if err != nil {
			return false, ctxErrOr(ctx, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return true, nil
			}
		}
	}
}

// errWatchEnded means a watch closed early (no leader, compaction, refused);
// the caller reads the queue again rather than trusting it.
var errWatchEnded = errors.New("watch ended")

// nextWatch returns the next response on wch, or why there is none.
func (c *Client) nextWatch(ctx context.Context, s *session, wch clientv3.WatchChan) (clientv3.WatchResponse, error) {
	select {
	case <-ctx.Done():
		return clientv3.WatchResponse{}, ctx.Err()
	case <-s.done:
		return clientv3.WatchResponse{}, c.lostWhileWaiting(s)
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil || wr.Canceled {
			return clientv3.WatchResponse{}, errWatchEnded
		}
		return wr, nil
	}
}

func (c *Client) lostWhileWaiting(s *session) error {
	if err := s.Err(); err != nil {
		return sessionCause(err)
	}
	return lost(ErrKeyDeleted)
}

// ctxErrOr returns ctx's error if it has ended, nil for errWatchEnded (the
// caller re-reads the queue), and err otherwise.
func ctxErrOr(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	if errors.Is(err, errWatchEnded) {
		return nil
	}
	return err
}
