package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// Lock acquires the lock named name, waiting until it is held or ctx ends.
// Waiters are served in arrival order (by their keys' create revisions), each
// watching only its predecessor.
//
// ctx bounds the whole call, including creating the session. When ctx ends
// first, Lock returns ctx's error and leaves no key of this attempt behind:
// the key is deleted with a request bounded by the cleanup timeout
// ([WithCleanupTimeout]), and a tombstone stops a create request still in
// flight from landing after that. If the session is lost while waiting, Lock
// returns an error matching [ErrLost], never the lock.
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
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			s.end(ErrLeaseExpired)
			continue
		}
		return l, err
	}
}

// attempt is one acquisition on session s. Its requests end when ctx ends or
// the session does, so a cut connection cannot hold it past the session.
func (c *Client) attempt(ctx context.Context, s *session, name string, wait bool) (*Lock, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	l, err := c.try(actx, s, name, wait)
	if err != nil && ctx.Err() == nil && s.Err() != nil {
		return nil, fmt.Errorf("etcdlock: lock %q: %w", name, sessionCause(s.Err()))
	}
	return l, err
}

// ticket is one attempt's place in a queue: its key, reused by later
// attempts of the same session once released (keys that are never reused
// would bloat etcd's key index until the next compaction and slow every
// queue read), and a tombstone key unique to the attempt.
type ticket struct {
	name, q, key, tomb string
	slot               int
}

func (c *Client) ticket(s *session, name string) ticket {
	q := c.queue(name)
	slot := s.takeSlot(name)
	return ticket{
		name: name, q: q, slot: slot,
		key:  fmt.Sprintf("%s%016x-%d", q, int64(s.id), slot),
		tomb: fmt.Sprintf("%sabandoned/%016x-%d", c.o.prefix, int64(s.id), c.seq.Add(1)),
	}
}

// maxStaleSlots bounds the slots skipped because their key still exists.
const maxStaleSlots = 3

func (c *Client) try(ctx context.Context, s *session, name string, wait bool) (*Lock, error) {
	for range maxStaleSlots {
		t := c.ticket(s, name)
		l, err := c.enqueue(ctx, s, t, wait)
		if !errors.Is(err, errSlotTaken) {
			return l, err
		}
		// A key of ours from an attempt whose abandon failed is still there;
		// its slot stays taken and goes with the session.
	}
	return nil, fmt.Errorf("etcdlock: lock %q: %d stale keys of this session in the queue", name, maxStaleSlots)
}

var errSlotTaken = errors.New("slot taken")

// enqueue creates t's key and waits for its turn (wait) or gives up (!wait).
func (c *Client) enqueue(ctx context.Context, s *session, t ticket, wait bool) (*Lock, error) {
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.tomb), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(t.key), "=", 0)).
		Then(clientv3.OpPut(t.key, "", clientv3.WithLease(s.id)),
			// Ours is the newest key: the second newest is our predecessor.
			clientv3.OpGet(t.q, clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))).
		Commit()
	if err != nil {
		c.abandon(ctx, s, t)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, err)
	}
	if !resp.Succeeded {
		return nil, errSlotTaken
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	rev := kvs[0].CreateRevision
	if len(kvs) > 1 {
		if !wait {
			c.abandon(ctx, s, t)
			return nil, fmt.Errorf("%w: %q", ErrLocked, t.name)
		}
		if err := c.waitTurn(ctx, s, t, rev, kvs[1]); err != nil {
			c.abandon(ctx, s, t)
			return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, err)
		}
	}
	return newLock(c, s, t, fence.Token(rev)), nil
}

// queue is the prefix under which the keys of lock name are queued.
func (c *Client) queue(name string) string { return c.o.prefix + "lock/" + name + "/" }

// abandon removes key after a failed or cancelled attempt. The create request
// may still be in flight (its response lost, its context ended), so abandon
// writes a tombstone, which makes that request's compare fail should it land
// later, and deletes the key in the same transaction. The tombstone is on the
// session's lease and goes with it. The request runs even though ctx may have
// ended, bounded by the cleanup timeout.
//
// When the session has ended there is nothing to do: its lease is gone or
// will expire with no one renewing it, and takes the key along.
//
// The slot is released only when the key is known gone.
func (c *Client) abandon(ctx context.Context, s *session, t ticket) {
	if s.Err() != nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.cleanupTimeout)
	defer cancel()
	_, err := c.cli.Txn(cctx).Then(
		clientv3.OpPut(t.tomb, "", clientv3.WithLease(s.id)),
		clientv3.OpDelete(t.key)).Commit()
	switch {
	case err == nil:
		s.releaseSlot(t.name, t.slot)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The lease is gone, and with it the key and any late create.
		s.end(ErrLeaseExpired)
	}
}
