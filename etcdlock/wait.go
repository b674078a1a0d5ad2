package etcdlock

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitTurn blocks until no key in t's queue was created before rev (ours),
// starting from pred, the key queued just before ours.
func (c *Client) waitTurn(ctx context.Context, s *session, t ticket, rev int64, pred *mvccpb.KeyValue) error {
	for pred != nil {
		at, err := c.waitDeleted(ctx, s, string(pred.Key), pred.CreateRevision)
		if err != nil {
			return err
		}
		if pred, err = c.predecessor(ctx, s, t, rev, at); err != nil {
			return err
		}
	}
	return nil
}

// predecessor returns the key queued just before ours, or nil, and checks in
// the same read that our own key still exists: a waiter whose lease expired
// must never be handed the lock.
//
// When at (the revision at which the last predecessor's deletion was seen)
// is known, it reads the snapshot at that revision without a quorum round
// trip: any snapshot taken after our key was created is enough, because keys
// created later can never precede ours. The member may not serve it (not yet
// applied, compacted); then a linearizable read decides.
func (c *Client) predecessor(ctx context.Context, s *session, t ticket, rev, at int64) (*mvccpb.KeyValue, error) {
	before := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	if at >= rev {
		resp, err := c.cli.Txn(ctx).Then(
			clientv3.OpGet(t.key, clientv3.WithRev(at), clientv3.WithSerializable()),
			clientv3.OpGet(t.q, append(before, clientv3.WithRev(at), clientv3.WithSerializable())...),
		).Commit()
		if err == nil {
			own := resp.Responses[0].GetResponseRange().Kvs
			if len(own) == 0 || own[0].CreateRevision != rev {
				return nil, c.lostWhileWaiting(s)
			}
			return first(resp.Responses[1].GetResponseRange().Kvs), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", rev)).
		Then(clientv3.OpGet(t.q, before...)).
		Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, c.lostWhileWaiting(s)
	}
	return first(resp.Responses[0].GetResponseRange().Kvs), nil
}

func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// waitDeleted returns once the key pred, created at predRev, is gone, with
// the revision at which that was seen (0 if unknown). It watches from the
// current revision (a watcher from an old revision is "unsynced", and etcd
// only catches those up every 100 ms) and, once the watch is established,
// re-reads pred so that a deletion just before the watch is not missed.
func (c *Client) waitDeleted(ctx context.Context, s *session, pred string, predRev int64) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.cli.Watch(wctx, pred, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	if _, err := c.nextWatch(ctx, s, wch); err != nil {
		return 0, ctxErrOr(ctx, err)
	}
	resp, err := c.cli.Get(ctx, pred)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != predRev {
		return resp.Header.Revision, nil
	}
	for {
		wr, err := c.nextWatch(ctx, s, wch)
		if err != nil {
			return 0, ctxErrOr(ctx, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return ev.Kv.ModRevision, nil
			}
		}
	}
}

// errWatchEnded means a watch closed early (no leader, compaction); the
// caller reads the queue again rather than trusting it.
var errWatchEnded = errors.New("watch ended")

// nextWatch returns the next response on wch, or why there is none.
func (c *Client) nextWatch(ctx context.Context, s *session, wch clientv3.WatchChan) (clientv3.WatchResponse, error) {
	select {
	case <-ctx.Done():
		return clientv3.WatchResponse{}, ctx.Err()
	case <-s.done:
		return clientv3.WatchResponse{}, c.lostWhileWaiting(s)
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil {
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
