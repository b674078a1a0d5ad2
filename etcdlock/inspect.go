package etcdlock

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Queue is the queue of one name as read at one revision, of a kind held
// by its queue (a lock, an election; [SemaphoreQueue] adds a semaphore's
// permits): the holders (or leader) and the waiters (candidates) behind
// them, in the order they will be served.
type Queue struct {
	// Name is the name whose queue it is.
	Name string
	// Rev is the etcd revision the queue was read at.
	Rev int64
	// Holder is the first of Holders (the lock's holder, the election's
	// leader); nil when there is none. With readers holding, it is the
	// first of them.
	Holder *Entry
	// Holders are every acquisition holding now, in arrival order: the
	// holder, the readers sharing the lock ([Client.RLock]), or a
	// semaphore's holders ([Semaphore.Inspect]).
	Holders []Entry
	// Waiters are the acquisitions waiting behind the holders, in arrival
	// order.
	Waiters []Entry
}

// Empty reports whether q has no holder and no waiter: a free lock, an
// election with no candidate.
func (q Queue) Empty() bool { return len(q.Holders) == 0 && len(q.Waiters) == 0 }

func (Queue) nameValue() {}

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
	ttls, err := c.readTTLs(ctx, resp.Kvs)
	if err != nil {
		return Queue{}, fmt.Errorf("etcdlock: %s %q: %w", op, name, c.explain(err))
	}
	return queueOf(name, resp.Header.Revision, resp.Kvs, ttls), nil
}

// queueOf is the queue of the name called name whose keys are
// kvs, in create order, as of revision rev, each entry's TTL taken from
// ttls. It does no I/O: Inspect builds its queue with it from a read,
// WatchStatus from the keys its watch keeps.
func queueOf(name string, rev int64, kvs []*mvccpb.KeyValue, ttls leaseTTLs) Queue {
	q := Queue{Name: name, Rev: rev}
	holders := entitled(kvs, 1)
	for i, kv := range kvs {
		e := entryOf(kv)
		e.TTL = ttls.of(e.Lease)
		if i < holders {
			q.Holders = append(q.Holders, e)
		} else {
			q.Waiters = append(q.Waiters, e)
		}
	}
	if len(q.Holders) > 0 {
		q.Holder = &q.Holders[0]
	}
	return q
}

// leaseTTLs are leases' TTLs by lease: the time each had left when
// Inspect read it, or, in WatchStatus, its granted TTL. A lease not in it
// (and no lease) reads as -1: not read, or gone.
type leaseTTLs map[clientv3.LeaseID]time.Duration

// of is the TTL of lease id, -1 when t does not have it.
func (t leaseTTLs) of(id clientv3.LeaseID) time.Duration {
	if ttl, ok := t[id]; ok {
		return ttl
	}
	return -1
}

// readTTLs reads the time left of every lease of the keys of kvss, one
// request per distinct lease.
func (c *Client) readTTLs(ctx context.Context, kvss ...[]*mvccpb.KeyValue) (leaseTTLs, error) {
	ttls := leaseTTLs{}
	for _, kvs := range kvss {
		for _, kv := range kvs {
			id := clientv3.LeaseID(kv.Lease)
			if _, ok := ttls[id]; ok || id == clientv3.NoLease {
				continue
			}
			resp, err := c.cli.TimeToLive(ctx, id)
			if err != nil {
				return nil, err
			}
			ttls[id] = secondsOrGone(resp.TTL)
		}
	}
	return ttls, nil
}

// secondsOrGone is a TTL in seconds as etcd gives it, -1 (a lease gone)
// when negative.
func secondsOrGone(s int64) time.Duration {
	if s < 0 {
		return -1
	}
	return time.Duration(s) * time.Second
}
