package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// acquire is one acquisition of any kind, traced and measured, in the
// queue of its kind's key space (kindInfo.queue). Name and data are valid.
func (c *Client) acquire(ctx context.Context, sp spot) (*Lock, error) {
	sp.q = kindTable[sp.kind].queue(c.keys(), sp.name)
	ctx, o := c.obs.acquireStart(ctx, acquireStartEvent{kind: sp.kind, name: sp.name, wait: sp.wait})
	l, err := c.acquireRetrying(ctx, sp)
	e := acquireEndEvent{kind: sp.kind, name: sp.name, err: err}
	if l != nil {
		e.token, e.lease = l.token, l.s.id
	}
	c.obs.acquireEnd(ctx, o, e)
	return l, err
}

// acquireRetrying makes an attempt on the Client's session, and retries it
// once, on a new session, when etcd reports the first one's lease gone
// before the key was created.
func (c *Client) acquireRetrying(ctx context.Context, sp spot) (*Lock, error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("etcdlock: %q: %w", sp.name, err)
		}
		sctx, cancel := sp.request(ctx)
		s, err := c.session(sctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("etcdlock: %q: %w", sp.name, err)
		}
		l, err := c.attempt(ctx, s, sp)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.end(ErrLeaseExpired)
			if attempt == 0 {
				continue
			}
			return nil, fmt.Errorf("etcdlock: %q: %w", sp.name, lost(ErrLeaseExpired))
		}
		return l, c.explain(err)
	}
}

// attempt is one acquisition on session s. Its requests end when ctx ends or
// the session does, so a cut connection cannot hold it past the session.
func (c *Client) attempt(ctx context.Context, s *session, sp spot) (*Lock, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	t := c.ticket(s, sp)
	l, err := c.enqueue(actx, s, t)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil, err // acquireRetrying retries once on a new session
	}
	if err != nil && ctx.Err() == nil && !t.queued && errors.Is(s.Err(), ErrLeaseExpired) {
		// Another call heard first that etcd has no such lease, and its
		// end of the session cancelled our create. Nothing of this attempt
		// can be in etcd (a key on a gone lease goes with it, and a create
		// naming it is refused), so it is as if etcd had told us.
		return nil, rpctypes.ErrLeaseNotFound
	}
	if err != nil && ctx.Err() == nil && s.Err() != nil {
		return nil, fmt.Errorf("etcdlock: %q: %w", sp.name, sessionCause(s.Err()))
	}
	return l, err
}

// maxListedHolders bounds the holders a LockedError lists (readers that
// share a lock, beyond a semaphore's permits).
const maxListedHolders = 16

// The sort and limit options of the queue reads, built once: each of
// clientv3's WithSort and WithLimit calls allocates a closure. They are
// shared by every goroutine, which is safe because these closures change
// nothing they captured; a WithSort(SortByKey, SortAscend) would (it
// reassigns its order on each call), so do not share one of those.
var (
	newestFirst = clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)
	oldestFirst = clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)
	limits      = func() (l [maxListedHolders + 2]clientv3.OpOption) {
		for n := range l {
			l[n] = clientv3.WithLimit(int64(n))
		}
		return l
	}()
)

// withLimit is clientv3.WithLimit(n), built once for the limits of an
// acquisition's reads up to TryLock's (maxListedHolders+1).
func withLimit(n int) clientv3.OpOption {
	if n >= 0 && n < len(limits) {
		return limits[n]
	}
	return clientv3.WithLimit(int64(n))
}

// maxCreateTries bounds the creates refused because the lane's marker or key
// was not as last seen (a late request of an earlier use of the lane).
const maxCreateTries = 3

// enqueue creates t's key and waits for its turn (wait) or gives up (!wait).
func (c *Client) enqueue(ctx context.Context, s *session, t *ticket) (*Lock, error) {
	rev, preds, firsts, err := c.create(ctx, s, t)
	if err != nil {
		return nil, err
	}
	if t.second != nil {
		if err := t.second.check(preds); err != nil {
			c.abandon(ctx, s, t, rev)
			return nil, err
		}
	}
	at := rev // the revision at which the turn had come
	if len(preds) >= t.need() {
		if !t.wait {
			c.abandon(ctx, s, t, rev)
			le := &LockedError{Name: t.name}
			n := max(1, entitled(firsts, t.need()))
			if limit := max(t.need(), maxListedHolders); n > limit {
				n, le.More = limit, true // read one more than listed: there are more
			}
			for _, kv := range firsts[:n] {
				e := entryOf(kv)
				if t.second != nil {
					e = t.second.holder(e)
				}
				le.Holders = append(le.Holders, e)
			}
			le.Holder = le.Holders[0]
			return nil, le
		}
		if at, err = c.waitTurn(ctx, s, t, rev, preds); err != nil {
			c.abandon(ctx, s, t, rev)
			return nil, fmt.Errorf("etcdlock: %q: %w", t.name, err)
		}
	}
	// The read that handed us the turn may predate the end of our session:
	// never return a lock whose lease this process already knows is gone.
	token := rev
	if t.second != nil {
		if token, err = t.second.claim(ctx, c.turn(s, t, rev, at), c.secondCalls(s, t)); err != nil {
			c.abandon(ctx, s, t, rev)
			if le := (*LockedError)(nil); errors.As(err, &le) {
				return nil, le // TryAcquire, every slot held: as TryLock answers
			}
			return nil, fmt.Errorf("etcdlock: %q: %w", t.name, err)
		}
	}
	if err := s.check(); err != nil {
		c.abandon(ctx, s, t, rev)
		return nil, fmt.Errorf("etcdlock: %q: %w", t.name, sessionCause(err))
	}
	l, err := newLock(c, s, t, fence.Token(token))
	if err != nil {
		c.abandon(ctx, s, t, rev)
		return nil, err
	}
	return l, nil
}

// create puts t's key, provided the lane's marker is as last seen (so no
// create of an earlier use of the lane can land), and returns its create
// revision, our nearest t.need blockers (see predecessors), and for
// TryLock the first keys in the queue (its holders', see maxListedHolders).
func (c *Client) create(ctx context.Context, s *session, t *ticket) (rev int64, preds []*mvccpb.KeyValue, firsts []*mvccpb.KeyValue, err error) {
	t.at = time.Now()
	for range maxCreateTries {
		ops := []clientv3.Op{
			clientv3.OpPut(t.key, encodeRecordSlot(c.o.owner, t.at, t.data, t.agreed, -1), clientv3.WithLease(s.id)),
			// Ours is the newest key: the newest blockers but ours are our predecessors.
			t.blockers(newestFirst, withLimit(t.need()+1)),
		}
		if !t.wait {
			ops = append(ops, clientv3.OpGet(t.q, clientv3.WithPrefix(), oldestFirst, withLimit(max(t.need(), maxListedHolders)+1)))
		}
		ops, second := t.readSecond(ops, nil)
		rctx, cancel := t.request(ctx)
		resp, err := c.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", 0), t.marker.at(t.mark)).
			Then(ops...).
			Commit()
		cancel()
		if err != nil {
			c.abandon(ctx, s, t, 0) // the create may still land: block it
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return 0, nil, nil, err
			}
			return 0, nil, nil, fmt.Errorf("etcdlock: %q: %w", t.name, err)
		}
		if resp.Succeeded {
			t.queued = true
			if !t.wait {
				firsts = resp.Responses[2].GetResponseRange().Kvs
			}
			t.sawSecond(resp, second, 1)
			for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
				if string(kv.Key) != t.key && len(preds) < t.need() {
					preds = append(preds, kv)
				}
			}
			t.rev = resp.Header.Revision // the transaction's revision is our put's
			return t.rev, preds, firsts, nil
		}
		// A request of an earlier use of the lane moved the marker, or
		// left a key: catch up, remove the key, and try again.
		if err := c.catchUp(ctx, s, t); err != nil {
			c.abandon(ctx, s, t, 0)
			return 0, nil, nil, fmt.Errorf("etcdlock: %q: %w", t.name, err)
		}
	}
	c.abandon(ctx, s, t, 0)
	return 0, nil, nil, fmt.Errorf("etcdlock: %q: lane %d of the session kept changing under us", t.name, t.lane)
}

// catchUp reads t's lane's marker after a create refused because a
// request of an earlier use of the lane moved it, or left a key, and
// removes that key, the two bounded together as one of t's requests
// (spot.bound).
func (c *Client) catchUp(ctx context.Context, s *session, t *ticket) error {
	rctx, cancel := t.request(ctx)
	defer cancel()
	gr, err := c.cli.Txn(rctx).Then(t.marker.get(), clientv3.OpGet(t.key)).Commit()
	if err != nil {
		return err
	}
	t.mark = markRev(gr.Responses[0].GetResponseRange().Kvs)
	if k := gr.Responses[1].GetResponseRange().Kvs; len(k) > 0 {
		if _, err := c.release(rctx, s, t, k[0].CreateRevision); err != nil {
			return fmt.Errorf("remove stale key: %w", err)
		}
	}
	return nil
}

// secondCalls returns the engine's calls for the second key of t, on
// session s (see secondCalls).
func (c *Client) secondCalls(s *session, t *ticket) secondCalls {
	b, ab := watchBackoff(), watchBackoff()
	return secondCalls{
		txn: c.cli.Txn,
		waitRange: func(ctx context.Context, dir string, from int64) error {
			if err := c.waitRange(ctx, s, dir, from); err != nil {
				return err
			}
			return s.pause(ctx, &b)
		},
		waitGone: func(ctx context.Context, kvs []*mvccpb.KeyValue) error {
			_, err := c.waitDeleted(ctx, s, t, kvs)
			var ended *watchEndedError
			if !errors.As(err, &ended) {
				return err
			}
			if permanent(ended.reason) {
				return ended.reason
			}
			return s.pause(ctx, &b)
		},
		lost: func() error { return c.lostWhileWaiting(s) },
		again: func(ctx context.Context, err error) error {
			if !unavailable(err) {
				return err
			}
			return s.pause(ctx, &ab)
		},
	}
}

// turn is what t's second key is told of t, whose queue key was created
// at rev on session s, and whose turn had come at revision at (0: not
// yet).
func (c *Client) turn(s *session, t *ticket, rev, at int64) turn {
	return turn{key: t.key, rev: rev, at: at, lease: s.id, wait: t.wait,
		record: func(slot int) string { return encodeRecordSlot(c.o.owner, t.at, t.data, t.agreed, slot) }}
}
