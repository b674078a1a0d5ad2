package etcdlock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// Break frees the lock called name from a holder that is stuck: it deletes
// the holder's key (one reader's, of readers sharing the lock), but only while the holder's token (the key's create
// revision) is still token, so a Break that arrives late, twice, or after
// the holder was replaced never frees someone else's acquisition. It
// returns the entry it deleted.
//
// It fails with an error matching [ErrNotHolder] when token is not the
// current holder's (the lock is free, or held by another acquisition), and
// with one matching [fence.ErrInvalidToken] (and [ErrInvalidArgument]) when
// token is not positive. It needs no session and the holder need not be
// reachable.
//
// The broken holder's process may still be running: if it is alive and
// connected, its [Lock.Done] closes within about 150 ms. Until then it can
// still write; a fenced resource refuses its writes once the next holder,
// whose token is greater, has written there.
func (c *Client) Break(ctx context.Context, name string, token fence.Token) (Entry, error) {
	return c.breakHolder(ctx, "Break", name, token, kindLock)
}

// BreakElection is [Client.Break] for the leader of the election called
// name.
func (c *Client) BreakElection(ctx context.Context, name string, token fence.Token) (Entry, error) {
	return c.breakHolder(ctx, "BreakElection", name, token, kindElection)
}

func (c *Client) breakHolder(ctx context.Context, op, name string, token fence.Token, k kind) (Entry, error) {
	if err := c.checkCall(ctx, op); err != nil {
		return Entry{}, err
	}
	if err := validateName(name); err != nil {
		return Entry{}, err
	}
	if err := token.Validate(); err != nil {
		return Entry{}, fmt.Errorf("%w: %s %q: %w", ErrInvalidArgument, op, name, err)
	}
	q := kindTable[k].queue(c.keys(), name)
	kvs, err := c.holders(ctx, q)
	if err != nil {
		return Entry{}, fmt.Errorf("etcdlock: %s %q: %w", op, name, c.explain(err))
	}
	i := slices.IndexFunc(kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision == int64(token) })
	if i < 0 {
		return Entry{}, c.notHolder(name, token, kvs)
	}
	e := entryOf(kvs[i])
	del, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.Key), "=", int64(token))).
		Then(clientv3.OpDelete(e.Key)).
		Commit()
	if err != nil {
		return Entry{}, fmt.Errorf("etcdlock: %s %q: %w", op, name, c.explain(err))
	}
	if !del.Succeeded {
		if kvs, err = c.holders(ctx, q); err != nil {
			return Entry{}, fmt.Errorf("etcdlock: %s %q: %w", op, name, c.explain(err))
		}
		return Entry{}, c.notHolder(name, token, kvs)
	}
	return e, nil
}

// holders reads the keys holding queue q now (see entitled).
func (c *Client) holders(ctx context.Context, q string) ([]*mvccpb.KeyValue, error) {
	resp, err := c.cli.Get(ctx, q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	return resp.Kvs[:entitled(resp.Kvs, 1)], nil
}

func (c *Client) notHolder(name string, token fence.Token, holders []*mvccpb.KeyValue) error {
	if len(holders) == 0 {
		return fmt.Errorf("%w: %q is free, not held with token %d", ErrNotHolder, name, token)
	}
	return fmt.Errorf("%w: %q is held by %v, not with token %d", ErrNotHolder, name, entryOf(holders[0]), token)
}

// List returns the names of kind (one of [Kinds]) that have a key: a
// holder, a waiter, a candidate, a group's member or partition, sorted.
// ctx bounds the request. It fails with an error matching
// [ErrInvalidArgument] for a kind that is not one of Kinds.
func (c *Client) List(ctx context.Context, kind string) ([]string, error) {
	return c.list(ctx, "List", kind)
}

// ListLocks is [Client.List] of "lock": the locks that have a holder or a
// waiter.
func (c *Client) ListLocks(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListLocks", lockSpace.kind)
}

// ListSemaphores is [Client.List] of "semaphore": the semaphores that have
// a holder or a waiter.
func (c *Client) ListSemaphores(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListSemaphores", semSpace.kind)
}

// ListElections is [Client.List] of "election": the elections that have a
// candidate.
func (c *Client) ListElections(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListElections", electSpace.kind)
}

// ListGroups is [Client.List] of "group": the groups that have a member
// or a partition's key.
func (c *Client) ListGroups(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListGroups", groupSpace.kind)
}

// list lists the names of kind.
func (c *Client) list(ctx context.Context, op, kind string) ([]string, error) {
	if err := c.checkCall(ctx, op); err != nil {
		return nil, err
	}
	sp := spaceOf(kind)
	if sp == nil {
		return nil, fmt.Errorf("%w: %s: kind %q is none of %q", ErrInvalidArgument, op, kind, Kinds())
	}
	resp, err := c.cli.Get(ctx, c.keys().space(sp.seg), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %s: %w", op, c.explain(err))
	}
	seen := map[string]bool{}
	var names []string
	for _, kv := range resp.Kvs {
		name, ok := c.keys().nameIn(sp.seg, string(kv.Key))
		if ok && !seen[name] && validateName(name) == nil {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Status reads the names that scope chooses, of every kind, at one
// revision: who holds and who waits, as [Client.WatchStatus] first reports
// them, but with each Entry's TTL the time its lease has left (as
// [Client.Inspect] reads it). It sends one transaction (one per 64 of the
// scope's ranges, all at the first one's revision) and one request per
// distinct lease; ctx bounds them. It needs no session.
//
// It fails on a nil ctx, an invalid name in scope (an error matching
// [ErrInvalidName]), or a failed request. It reads only, and so works as
// well after [Client.Close], as the Inspect calls do.
func (c *Client) Status(ctx context.Context, scope StatusScope) (Status, error) {
	if err := c.checkCall(ctx, "Status"); err != nil {
		return Status{}, err
	}
	if err := scope.validate(); err != nil {
		return Status{}, err
	}
	keys, rev, err := c.readRanges(ctx, scope.ranges(c.keys()))
	if err != nil {
		return Status{}, fmt.Errorf("etcdlock: Status: %w", c.explain(err))
	}
	ttls, err := c.readTTLs(ctx, slices.Collect(maps.Values(keys)))
	if err != nil {
		return Status{}, fmt.Errorf("etcdlock: Status: %w", c.explain(err))
	}
	return c.keys().statusOf(scope, keys, rev, ttls), nil
}
