package etcdlock

import "context"

// RLock acquires the lock named name as a reader: it shares the lock with
// the other readers and excludes its writers, the holders of [Client.Lock]
// on the same name. It waits until no writer holds the lock or waits for
// it ahead of this call: a writer that waits holds back the readers that
// come after it, so that writers are not starved.
//
// A reader is a [Lock] like any other: it has a token (its key's create
// revision), Done, Err and ValidUntil, and is released with Unlock. Every
// writer's token is greater than the token of every holder before it,
// readers included, so a resource fenced with the tokens of writers and
// readers alike refuses the late write of a writer deposed by anyone.
// Readers' tokens do not fence one another: readers that hold together
// carry different tokens, and a resource that every reader writes to must
// not be fenced by "refuse anything lower" across readers (see the
// package documentation, "Read/write locks").
//
// ctx bounds the call as for [Client.Lock], and the same guarantees hold:
// arrival order among writers, nothing left behind by a cancelled call, a
// late or repeated request that cannot land afterwards.
func (c *Client) RLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.lock(ctx, name, kindRead, true, opts)
}

// TryRLock acquires the lock named name as a reader if no writer holds it
// or waits for it, and otherwise returns a [*LockedError] (matching
// [ErrLocked]) at once, leaving no key behind, as [Client.TryLock] does.
func (c *Client) TryRLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.lock(ctx, name, kindRead, false, opts)
}
