package etcdlock

import (
	"context"
	"fmt"
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

// ListLocks returns the names of the locks that have a holder or a waiter,
// sorted. ctx bounds the request.
func (c *Client) ListLocks(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListLocks", spaceLock)
}

// ListSemaphores returns the names of the semaphores that have a holder or
// a waiter, sorted. ctx bounds the request.
func (c *Client) ListSemaphores(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListSemaphores", spaceSem)
}

// ListElections returns the names of the elections that have a candidate,
// sorted. ctx bounds the request.
func (c *Client) ListElections(ctx context.Context) ([]string, error) {
	return c.list(ctx, "ListElections", spaceElect)
}

// list lists the names in key space sp.
func (c *Client) list(ctx context.Context, op, sp string) ([]string, error) {
	if err := c.checkCall(ctx, op); err != nil {
		return nil, err
	}
	resp, err := c.cli.Get(ctx, c.keys().space(sp), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %s: %w", op, c.explain(err))
	}
	seen := map[string]bool{}
	var names []string
	for _, kv := range resp.Kvs {
		name, ok := c.keys().nameIn(sp, string(kv.Key))
		if ok && !seen[name] && validateName(name) == nil {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}
