package etcdlock

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitTurn blocks until no key in queue q was created before rev, while
// checking, in the same transaction, that our own key (rev) still exists: a
// waiter whose lease expired must never be handed the lock.
func (c *Client) waitTurn(ctx context.Context, s *session, q, key string, rev int64) error {
	for {
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpGet(q, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)).
			Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return c.lostWhileWaiting(s)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil
		}
		if err := c.waitDeleted(ctx, s, string(kvs[0].Key), kvs[0].CreateRevision); err != nil {
			return err
		}
	}
}

// waitDeleted returns once the key pred, created at predRev, is gone. It
// watches from the current revision (a watcher from an old revision is
// "unsynced" and etcd only catches those up every 100 ms) and, once the
// watch is established, re-reads pred so that a delete that came before the
// watch is not missed.
func (c *Client) waitDeleted(ctx context.Context, s *session, pred string, predRev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.cli.Watch(wctx, pred, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return c.lostWhileWaiting(s)
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil {
			return ctxErrOr(ctx, nil) // let the caller re-check
		}
	}
	resp, err := c.cli.Get(ctx, pred)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != predRev {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return c.lostWhileWaiting(s)
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return ctxErrOr(ctx, nil)
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}

func (c *Client) lostWhileWaiting(s *session) error {
	if err := s.Err(); err != nil {
		return sessionCause(err)
	}
	return lost(ErrKeyDeleted)
}

func ctxErrOr(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	return err
}
