package etcdlock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// waitTurn blocks until no key in t's queue was created before rev (ours),
// starting from pred, the key queued just before ours.
//
// A watch that ends without telling anything (etcd refused it: an expired
// auth token on the watch stream, no leader) is followed by a pause that
// doubles up to maxWatchBackoff, so a waiter sends a few requests a second
// at most while watches keep failing. A watch refused for its stream's auth
// token is retried on a new stream (see watchStream). A read of the queue
// that fails for want of a leader is read again after the same pause (see
// readPredecessor).
func (c *Client) waitTurn(ctx context.Context, s *session, t *ticket, rev int64, pred *mvccpb.KeyValue) error {
	backoff := minWatchBackoff
	var ws watchStream
	for pred != nil {
		gone, err := c.waitDeleted(ctx, s, &ws, string(pred.Key), pred.CreateRevision)
		var ended *watchEndedError
		switch {
		case errors.As(err, &ended):
			if err := ws.refused(c, ended.reason); err != nil {
				return err
			}
			if err := pause(ctx, s, &backoff); err != nil {
				return err
			}
		case err != nil:
			return err
		case gone:
			backoff = minWatchBackoff
		}
		if pred, err = c.readPredecessor(ctx, s, t, rev, &backoff); err != nil {
			return err
		}
	}
	return nil
}

// readPredecessor is predecessor, read again after a pause (see pause) while
// it fails with codes.Unavailable: the member has no leader, lost it during
// the read ("leader changed"), timed out, or went away. That is when a
// watch ends early too (a member without a leader cancels the watches made
// WithRequireLeader), and clientv3 does not retry a Txn itself; the read
// changes nothing, and a waiter must not give up its place in the queue
// for a failure that passes. ctx and the session bound the retries.
func (c *Client) readPredecessor(ctx context.Context, s *session, t *ticket, rev int64, backoff *time.Duration) (*mvccpb.KeyValue, error) {
	for {
		pred, err := c.predecessor(ctx, s, t, rev)
		if !unavailable(err) {
			return pred, err
		}
		if err := pause(ctx, s, backoff); err != nil {
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

// watchStream chooses the gRPC stream a waiter's watches go on.
//
// clientv3 sends all watches whose contexts carry the same outgoing
// metadata on one stream, and etcd checks the auth token the stream was
// opened with each time a watch is created on it. Once that token has
// expired (a simple token unused for its TTL, a JWT past its expiry), etcd
// refuses every new watch on the stream, while the watches already on it
// (of other waiters) keep it open. A watch refused for its token
// is therefore retried on a stream of its own, marked by a metadata value
// of its own, which clientv3 opens after logging in afresh.
type watchStream struct{ key string }

// watchStreamKey is the metadata key that gives a watch its own stream.
const watchStreamKey = "fencelock-watch-stream"

func (w *watchStream) context(ctx context.Context) context.Context {
	if w.key == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, watchStreamKey, w.key)
}

// renew makes the next watch go on a stream of its own, which clientv3
// opens (logging in afresh).
func (w *watchStream) renew(c *Client) { w.key = strconv.FormatUint(c.seq.Add(1), 10) }

// refused takes note of why etcd refused a watch (nil: the watch ended
// without a reason): an auth token it no longer accepts makes the next
// watch go on a new stream; a missing permission is returned.
func (w *watchStream) refused(c *Client, reason error) error {
	reason = refusal(reason)
	switch {
	case tokenRefused(reason) || errors.Is(reason, rpctypes.ErrUserEmpty):
		w.renew(c)
	case permanent(reason):
		return reason
	}
	return nil
}

const (
	minWatchBackoff = 10 * time.Millisecond
	maxWatchBackoff = time.Second
)

// retryPause waits before the next attempt of a loop whose last attempt
// started at start: *d, or less if ctx ends, reset to the minimum first if
// that attempt lasted, and doubled after.
func retryPause(ctx context.Context, start time.Time, d *time.Duration) {
	if time.Since(start) > maxWatchBackoff {
		*d = minWatchBackoff
	}
	t := time.NewTimer(*d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	*d = min(2**d, maxWatchBackoff)
}

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
// or the watch on it ended early (a *watchEndedError: the caller reads the
// queue again). It watches on the stream ws chooses, from the current revision (a watcher from an old
// revision is "unsynced", and etcd only catches those up every 100 ms) and,
// once the watch is established, re-reads pred so that a deletion just
// before the watch is not missed.
func (c *Client) waitDeleted(ctx context.Context, s *session, ws *watchStream, pred string, predRev int64) (bool, error) {
	wctx, cancel := context.WithCancel(ws.context(clientv3.WithRequireLeader(ctx)))
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

// refusal returns etcd's reason for refusing a watch as the error it stands
// for. clientv3 passes it on as an untyped error carrying the text of the
// gRPC status etcd sent, which errors.Is does not match.
func refusal(reason error) error {
	if reason == nil {
		return nil
	}
	for _, e := range []error{rpctypes.ErrGRPCInvalidAuthToken, rpctypes.ErrGRPCAuthOldRevision,
		rpctypes.ErrGRPCUserEmpty, rpctypes.ErrGRPCPermissionDenied} {
		if reason.Error() == e.Error() {
			return rpctypes.Error(e)
		}
	}
	return reason
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

// nextWatch returns the next response on wch, or why there is none.
func (c *Client) nextWatch(ctx context.Context, s *session, wch clientv3.WatchChan) (clientv3.WatchResponse, error) {
	select {
	case <-ctx.Done():
		return clientv3.WatchResponse{}, ctx.Err()
	case <-s.done:
		return clientv3.WatchResponse{}, c.lostWhileWaiting(s)
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil || wr.Canceled {
			return clientv3.WatchResponse{}, &watchEndedError{reason: wr.Err()}
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

// ctxErrOr returns ctx's error if it has ended, and err otherwise.
func ctxErrOr(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	return err
}
