package etcdlock

import "context"

// Lock acquires the lock named name, waiting until it is held or ctx ends.
// Waiters are served in arrival order (by their keys' create revisions), each
// watching only its predecessor.
//
// A waiter sends no request while its watch works, besides the session's
// keepalives (one every third of the TTL); its watch is one creation on
// the Client's one watch stream, which every watch of the Client shares
// and which is probed, while it carries watches, every third of the TTL
// (at least every 500 ms): a stream that hangs while the connection works
// is replaced within about two thirds of the TTL, and the waiter reads the
// queue again. When etcd ends or refuses its watch, or the stream ends, it
// re-reads the queue and watches again after a pause that doubles from
// 10 ms to 1 s (a read that fails for want of a leader is repeated after
// the same pause, rather than ending Lock): in the worst case 7 rounds in
// the first second and one a second after that, each a watch creation and
// a read.
//
// ctx bounds the whole call, including creating the session. When ctx ends
// first, Lock returns ctx's error and leaves no queue key of this attempt
// behind: the key is deleted with a request bounded by the cleanup timeout
// ([WithCleanupTimeout]), retried in the background if that fails. A create
// request still in flight, or delivered twice, cannot land afterwards: every
// create compares the mod revision of its session lane's marker key, and
// every cleanup writes that marker. The session keeps one marker key per
// lane (its peak number of concurrent acquisitions) until it ends. If the
// session is lost while waiting, Lock returns an error matching [ErrLost],
// never the lock.
//
// The key's value records the Client's owner ([WithOwner]), the time and
// the options' metadata ([WithMetadata]), in the same request that creates
// it; [Client.Inspect] reads them.
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.lock(ctx, name, kindLock, true, opts)
}

// TryLock acquires the lock named name if no one else holds or waits for it,
// and otherwise returns a [*LockedError] (matching [ErrLocked]) naming the
// holder, at once, leaving no key behind. ctx bounds the call as for
// [Client.Lock].
//
// "At once" needs etcd's answer: when etcd cannot be reached, the requests
// wait for a connection (the etcd client keeps retrying it) and TryLock
// returns an error matching ctx's only when ctx ends. Give ctx a deadline to
// fail fast against an unreachable etcd.
func (c *Client) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.lock(ctx, name, kindLock, false, opts)
}

func (c *Client) lock(ctx context.Context, name string, k kind, wait bool, opts []LockOption) (*Lock, error) {
	if err := c.checkCall(ctx, "Lock"); err != nil {
		return nil, err
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	o, err := lockOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	if o.shared {
		k = kindRead
	}
	wctx, cancel := o.waitContext(ctx)
	defer cancel()
	l, err := c.acquire(wctx, spot{kind: k, name: name, data: o.metadata, wait: wait, noWatch: o.noWatch})
	l.keepAtLeast(o.minHold) // release.go
	return l, o.waited(ctx, wctx, name, err)
}

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
