package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Queue is a lock's or an election's queue as read at one revision: the
// holder (or leader) and the waiters (candidates) behind it, in the order
// they will be served.
type Queue struct {
	// Name is the lock's or election's name.
	Name string
	// Rev is the etcd revision the queue was read at.
	Rev int64
	// Holder is the holder of the lock or the election's leader; nil when
	// there is none. With readers holding, it is the first of them.
	Holder *Entry
	// Holders are every acquisition holding now, in arrival order: the
	// holder, the readers sharing the lock ([Client.RLock]), or a
	// semaphore's holders ([Semaphore.Inspect]).
	Holders []Entry
	// Waiters are the acquisitions waiting behind the holders, in arrival
	// order.
	Waiters []Entry
}

// Inspect reads the queue of the lock called name: who holds it, since
// when, with which token, how long its lease has left, and who waits
// behind it. It reads only: one range request and one lease TTL request
// per distinct lease. ctx bounds the requests.
//
// A key written by something else than this package reads as an unknown
// owner (see [Entry]), never as an error.
func (c *Client) Inspect(ctx context.Context, name string) (Queue, error) {
	return c.inspect(ctx, "Inspect", name, kindLock, 0)
}

// InspectElection is [Client.Inspect] for the election called name: Holder
// is the leader, Waiters the other candidates.
func (c *Client) InspectElection(ctx context.Context, name string) (Queue, error) {
	return c.inspect(ctx, "InspectElection", name, kindElection, 0)
}

// Leader returns the current leader of the election called name: its
// value, token, lease and owner, or an error matching [ErrNoLeader] when no
// candidate campaigns. ctx bounds the requests.
//
// The leader is the candidate etcd ranks first: the one entitled to lead,
// not proof that it leads now. It may not have learnt of its turn yet, and
// a candidate whose Campaign gave up just as its turn came (its context
// ended) is still reported until its cleanup delete lands: a round trip
// normally, and at worst, when that delete cannot reach etcd, until its
// lease expires. A lost leader is likewise reported until its lease
// expires. To route work to a leader, route on a value it proclaims once
// it has begun ([Term.Proclaim]), and fence what it writes.
func (c *Client) Leader(ctx context.Context, name string) (Entry, error) {
	q, err := c.inspect(ctx, "Leader", name, kindElection, 1)
	if err != nil {
		return Entry{}, err
	}
	if q.Holder == nil {
		return Entry{}, fmt.Errorf("%w: %q", ErrNoLeader, name)
	}
	return *q.Holder, nil
}

// inspect reads the queue of the kind k called name: its first limit keys (0:
// all of them). op names the call in errors.
func (c *Client) inspect(ctx context.Context, op, name string, k kind, limit int64) (Queue, error) {
	if err := c.checkCall(ctx, op); err != nil {
		return Queue{}, err
	}
	if err := validateName(name); err != nil {
		return Queue{}, err
	}
	resp, err := c.cli.Get(ctx, kindTable[k].queue(c.keys(), name), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(limit))
	if err != nil {
		return Queue{}, fmt.Errorf("etcdlock: %s %q: %w", op, name, c.explain(err))
	}
	q := Queue{Name: name, Rev: resp.Header.Revision}
	ttls := map[clientv3.LeaseID]time.Duration{}
	holders := entitled(resp.Kvs, 1)
	for i, kv := range resp.Kvs {
		e := entryOf(kv)
		if e.TTL, err = c.leaseTTL(ctx, ttls, e.Lease); err != nil {
			return Queue{}, fmt.Errorf("etcdlock: %s %q: %w", op, name, c.explain(err))
		}
		if i < holders {
			q.Holders = append(q.Holders, e)
		} else {
			q.Waiters = append(q.Waiters, e)
		}
	}
	if len(q.Holders) > 0 {
		q.Holder = &q.Holders[0]
	}
	return q, nil
}

// leaseTTL returns the time lease id has left, -1 when it is gone (or the
// key has none), asking etcd once per lease.
func (c *Client) leaseTTL(ctx context.Context, seen map[clientv3.LeaseID]time.Duration, id clientv3.LeaseID) (time.Duration, error) {
	if id == clientv3.NoLease {
		return -1, nil
	}
	if ttl, ok := seen[id]; ok {
		return ttl, nil
	}
	resp, err := c.cli.TimeToLive(ctx, id)
	if err != nil {
		return 0, err
	}
	ttl := time.Duration(resp.TTL) * time.Second
	if resp.TTL < 0 {
		ttl = -1
	}
	seen[id] = ttl
	return ttl, nil
}
