package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// Lock acquires the lock named name, waiting until it is held or ctx ends.
// Waiters are served in arrival order (by their keys' create revisions), each
// watching only its predecessor.
//
// A waiter sends no request while its watch works, besides the session's
// keepalives (one every third of the TTL). When etcd ends or refuses its
// watches, it re-reads the queue and watches again after a pause that
// doubles from 10 ms to 1 s: in the worst case 7 rounds in the first second
// and one a second after that, each a watch and a read, plus, when the
// watch was refused for an expired auth token, a new watch stream and a
// login (so at most 4 requests a second once the pause has grown).
//
// ctx bounds the whole call, including creating the session. When ctx ends
// first, Lock returns ctx's error and leaves no queue key of this attempt
// behind: the key is deleted with a request bounded by the cleanup timeout
// ([WithCleanupTimeout]), retried in the background if that fails. A create
// request still in flight, or delivered twice, cannot land afterwards: every
// create compares the mod revision of its session slot's marker key, and
// every cleanup writes that marker. The session keeps one marker key per
// slot (its peak number of concurrent acquisitions) until it ends. If the
// session is lost while waiting, Lock returns an error matching [ErrLost],
// never the lock.
func (c *Client) Lock(ctx context.Context, name string) (*Lock, error) {
	return c.acquire(ctx, name, true)
}

// TryLock acquires the lock named name if no one else holds or waits for it,
// and otherwise returns an error matching [ErrLocked] at once, leaving no key
// behind. ctx bounds the call as for [Client.Lock].
func (c *Client) TryLock(ctx context.Context, name string) (*Lock, error) {
	return c.acquire(ctx, name, false)
}

// acquire is Lock (wait) and TryLock (!wait). It retries once on a session
// that etcd reports gone before the key was created.
func (c *Client) acquire(ctx context.Context, name string, wait bool) (*Lock, error) {
	if ctx == nil {
		return nil, errors.New("etcdlock: nil context")
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err := c.session(ctx)
		if err != nil {
			return nil, err
		}
		l, err := c.attempt(ctx, s, name, wait)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.end(ErrLeaseExpired)
			if attempt == 0 {
				continue
			}
			return nil, fmt.Errorf("etcdlock: lock %q: %w", name, lost(ErrLeaseExpired))
		}
		return l, c.explain(err)
	}
}

// attempt is one acquisition on session s. Its requests end when ctx ends or
// the session does, so a cut connection cannot hold it past the session.
func (c *Client) attempt(ctx context.Context, s *session, name string, wait bool) (*Lock, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	t := c.ticket(s, name)
	l, err := c.enqueue(actx, s, t, wait)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil, err // acquire retries once on a new session
	}
	if err != nil && ctx.Err() == nil && s.Err() != nil {
		return nil, fmt.Errorf("etcdlock: lock %q: %w", name, sessionCause(s.Err()))
	}
	return l, err
}

// ticket is one attempt's place in a queue: the key and marker of one of
// the session's slots (see slots), and the marker's mod revision when the
// slot was taken.
type ticket struct {
	name, q, key, marker string
	slot                 int
	mark                 int64
	unmarked             bool        // released without moving the marker (etcd out of space); owned by the releasing goroutine
	noMark               atomic.Bool // set before such a release is sent; read by the lock's monitor
}

func (c *Client) ticket(s *session, name string) *ticket {
	q := c.queue(name)
	slot, mark := s.takeSlot()
	return &ticket{
		name: name, q: q, slot: slot, mark: mark,
		key:    fmt.Sprintf("%s%016x-%d", q, int64(s.id), slot),
		marker: fmt.Sprintf("%sslot/%016x-%d", c.o.prefix, int64(s.id), slot),
	}
}

// queue is the prefix under which the keys of lock name are queued.
func (c *Client) queue(name string) string { return c.o.prefix + "lock/" + name + "/" }

// maxCreateTries bounds the creates refused because the slot's marker or key
// was not as last seen (a late request of an earlier use of the slot).
const maxCreateTries = 3

// enqueue creates t's key and waits for its turn (wait) or gives up (!wait).
func (c *Client) enqueue(ctx context.Context, s *session, t *ticket, wait bool) (*Lock, error) {
	kvs, err := c.create(ctx, s, t)
	if err != nil {
		return nil, err
	}
	rev := kvs[0].CreateRevision
	if len(kvs) > 1 {
		if !wait {
			c.abandon(ctx, s, t, rev)
			return nil, fmt.Errorf("%w: %q", ErrLocked, t.name)
		}
		if err := c.waitTurn(ctx, s, t, rev, kvs[1]); err != nil {
			c.abandon(ctx, s, t, rev)
			return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, err)
		}
	}
	// The read that handed us the turn may predate the end of our session:
	// never return a lock whose lease this process already knows is gone.
	if err := s.check(); err != nil {
		c.abandon(ctx, s, t, rev)
		return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, sessionCause(err))
	}
	l, err := newLock(c, s, t, fence.Token(rev))
	if err != nil {
		c.abandon(ctx, s, t, rev)
		return nil, err
	}
	return l, nil
}

// create puts t's key, provided the slot's marker is as last seen (so no
// create of an earlier use of the slot can land), and returns our key and
// our predecessor's, if any.
func (c *Client) create(ctx context.Context, s *session, t *ticket) ([]*mvccpb.KeyValue, error) {
	for range maxCreateTries {
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", 0),
				clientv3.Compare(clientv3.ModRevision(t.marker), "=", t.mark)).
			Then(clientv3.OpPut(t.key, "", clientv3.WithLease(s.id)),
				// Ours is the newest key: the second newest is our predecessor.
				clientv3.OpGet(t.q, clientv3.WithPrefix(),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))).
			Commit()
		if err != nil {
			c.abandon(ctx, s, t, 0) // the create may still land: block it
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, err
			}
			return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, err)
		}
		if resp.Succeeded {
			return resp.Responses[1].GetResponseRange().Kvs, nil
		}
		// A request of an earlier use of the slot moved the marker, or
		// left a key: catch up, remove the key, and try again.
		gr, err := c.cli.Txn(ctx).Then(clientv3.OpGet(t.marker), clientv3.OpGet(t.key)).Commit()
		if err != nil {
			c.abandon(ctx, s, t, 0)
			return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, err)
		}
		t.mark = 0
		if m := gr.Responses[0].GetResponseRange().Kvs; len(m) > 0 {
			t.mark = m[0].ModRevision
		}
		if k := gr.Responses[1].GetResponseRange().Kvs; len(k) > 0 {
			if _, err := c.release(ctx, s, t, k[0].CreateRevision); err != nil {
				c.abandon(ctx, s, t, 0)
				return nil, fmt.Errorf("etcdlock: lock %q: remove stale key: %w", t.name, err)
			}
		}
	}
	c.abandon(ctx, s, t, 0)
	return nil, fmt.Errorf("etcdlock: lock %q: slot %d of the session kept changing under us", t.name, t.slot)
}
