package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil, err // acquire retries once on a new session
	}
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
		c.abandon(ctx, s, t, true) // the create may still land: tombstone it
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
			c.abandon(ctx, s, t, false)
			return nil, fmt.Errorf("%w: %q", ErrLocked, t.name)
		}
		if err := c.waitTurn(ctx, s, t, rev, kvs[1]); err != nil {
			c.abandon(ctx, s, t, false)
			return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, err)
		}
	}
	// The read that handed us the turn may predate the end of our session:
	// never return a lock whose lease this process already knows is gone.
	if err := s.check(); err != nil {
		c.abandon(ctx, s, t, false)
		return nil, fmt.Errorf("etcdlock: lock %q: %w", t.name, sessionCause(err))
	}
	l, err := newLock(c, s, t, fence.Token(rev))
	if err != nil {
		c.abandon(ctx, s, t, false)
		return nil, err
	}
	return l, nil
}

// queue is the prefix under which the keys of lock name are queued.
func (c *Client) queue(name string) string { return c.o.prefix + "lock/" + name + "/" }

// abandon removes t's key after a failed or cancelled attempt. The request
// runs even though ctx may have ended, bounded by the cleanup timeout; if it
// fails, it is retried in the background until it succeeds or the session
// ends, because the session's lease, renewed for the client's other locks,
// would otherwise keep the key, and with it everyone queued behind it.
//
// When the create request's outcome is unknown (it may still be in flight,
// its response lost or its context ended), abandon also writes the attempt's
// tombstone, which makes that request's compare fail should it land later.
// The tombstone is on the session's lease and goes with it.
//
// When the session has ended there is nothing to do: its lease is gone or
// will expire with no one renewing it, and takes the key along. The slot is
// released only once the key is known gone.
func (c *Client) abandon(ctx context.Context, s *session, t ticket, tombstone bool) {
	if c.deleteTicket(context.WithoutCancel(ctx), s, t, tombstone) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return // Close revokes the lease, and the key with it.
	}
	c.wg.Add(1)
	go c.retryAbandon(s, t, tombstone)
}

// deleteTicket makes one bounded attempt; it reports whether the key is
// known gone (or the session over).
func (c *Client) deleteTicket(ctx context.Context, s *session, t ticket, tombstone bool) bool {
	if s.Err() != nil {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, c.o.cleanupTimeout)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpDelete(t.key)}
	if tombstone {
		ops = append(ops, clientv3.OpPut(t.tomb, "", clientv3.WithLease(s.id)))
	}
	_, err := c.cli.Txn(cctx).Then(ops...).Commit()
	switch {
	case err == nil:
		s.releaseSlot(t.name, t.slot)
		return true
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The lease is gone, and with it the key and any late create.
		s.end(ErrLeaseExpired)
		return true
	}
	return false
}

// retryAbandon retries deleteTicket until it succeeds or the session ends.
func (c *Client) retryAbandon(s *session, t ticket, tombstone bool) {
	defer c.wg.Done()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(delay):
		}
		if c.deleteTicket(s.ctx, s, t, tombstone) {
			return
		}
	}
}
