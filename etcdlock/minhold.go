package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// MaxMinHold is the longest minimum hold [WithMinHold] accepts: a year.
const MaxMinHold = 366 * 24 * time.Hour

// WithMinHold keeps the lock's key in etcd until at least d after the
// acquisition (measured from when Lock or TryLock returned it), as
// ShedLock's lockAtLeastFor does, so that a job scheduled on several
// machines runs once per period even when it takes a millisecond and the
// machines' clocks differ by less than d. Default 0: none.
//
// [Lock.Unlock] still returns at once, and [Lock.Done] closes: what stays is
// the key. An Unlock before d has passed moves the key, with its create
// revision and value, onto a lease of its own whose TTL covers the time
// left (rounded up to whole seconds), in a transaction that compares the
// key's create revision with the token, so it never touches another
// acquisition's key; the next waiter then gets the lock when that lease
// expires, and a later holder's token is still greater. The key outlives
// the Client's session: [Client.Close] and the end of the process after
// Unlock leave it in place until its lease expires. An Unlock after d
// deletes the key, as without the option.
//
// The minimum hold starts with Unlock: a process that dies, or a Client
// closed, while the lock is held frees the lock when the session's lease
// goes (at once on Close, within the TTL after a crash), so a crashed job
// can run again elsewhere. If the move fails (etcd unreachable or out of
// space), Unlock returns the error and keeps trying in the background, as
// a failed release does; the key stays on the session's lease meanwhile,
// and once d has passed the retry deletes it. Done closes once the move
// (or the deletion) has landed; a Client closed before then revokes the
// session's lease, and the key with it.
//
// It applies to [Client.Lock], [Client.TryLock], [Client.RLock],
// [Client.TryRLock], [Client.Do] and each lock of [Client.LockAll] (a
// LockAll that fails releases the locks it took at once, without the
// hold: its caller never got them); a
// [Semaphore], whose permit is a second key, refuses it with
// [ErrInvalidOption]. Negative d, or d over [MaxMinHold], makes the call
// fail with [ErrInvalidOption] before any request.
func WithMinHold(d time.Duration) LockOption {
	return lockOptionFunc(func(o *lockOptions) { o.minHold = d })
}

// checkMinHold validates the option of [WithMinHold].
func (o *lockOptions) checkMinHold() error {
	if o.minHold < 0 || o.minHold > MaxMinHold {
		return fmt.Errorf("%w: minimum hold %v is not in [0, %v]", ErrInvalidOption, o.minHold, MaxMinHold)
	}
	return nil
}

// minHold is a lock's minimum hold (see WithMinHold).
type minHold struct {
	d     time.Duration // 0: none
	from  time.Time     // when the lock was handed to the caller
	lease clientv3.LeaseID
}

// keepAtLeast gives l, just acquired (nil: not), a minimum hold of d.
func (l *Lock) keepAtLeast(d time.Duration) {
	if l != nil && d > 0 {
		l.hold = minHold{d: d, from: time.Now(), lease: newLeaseID()}
	}
}

// dropHold removes l's minimum hold, before l was handed to the caller.
func (l *Lock) dropHold() {
	l.unlockMu.Lock()
	defer l.unlockMu.Unlock()
	l.hold = minHold{}
}

// heldOn is how a key released by moving it onto its own lease ended (see
// released): by us, but the key and the slot stay until the lease expires.
const heldOn released = leaseGone + 1

// releaseKey is Unlock's release: it moves l's key onto a lease of its own
// while the minimum hold has time left, and deletes it otherwise. unlockMu
// is held. Every request it sends is safe to arrive late or twice: the
// lease's ID is chosen once per lock, so that a grant whose reply was lost
// is found again ("lease already exists") instead of granted twice, and
// the move compares the key's create revision with the token, so that it
// moves no other acquisition's key (a later use of the same session slot
// reuses the key's name), and writes the slot's marker as a release does.
// A grant that lands and is never used (the move found the key gone) is
// revoked; one that cannot be leaves an empty lease that expires within
// the hold.
func (l *Lock) releaseKey(ctx context.Context) (released, error) {
	rev := l.t.rev // the key's create revision (the token, for a lock)
	left := l.hold.d - time.Since(l.hold.from)
	if l.hold.d == 0 || left <= 0 {
		return l.c.release(ctx, l.s, l.t, rev)
	}
	ttl, err := l.grantHold(ctx, left)
	if err != nil {
		return 0, err
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(l.t.key), "=", rev)
	if l.c.o.ctl.unconditionalMove {
		cmp = clientv3.Compare(clientv3.CreateRevision(l.t.key), "!=", 0)
	}
	resp, err := l.c.cli.Txn(ctx).
		If(cmp).
		Then(clientv3.OpPut(l.t.key, "", clientv3.WithLease(l.hold.lease), clientv3.WithIgnoreValue()),
			l.t.marker.put(l.s, markOurs(rev))).
		Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The session's lease is gone, or the hold's has expired: the
		// release tells which, and deletes the key in the latter case.
		return l.c.release(ctx, l.s, l.t, rev)
	case err != nil:
		return 0, err
	case !resp.Succeeded:
		// The key is gone (the lease expired, or someone else deleted it):
		// the release tells, and moves the marker. The hold's lease then
		// holds nothing (only this key is ever put on it, and a late move
		// compares the same create revision), so it is revoked rather than
		// left, empty, for as long as the hold; in the background and best
		// effort, as it expires anyway, so that a slow revoke does not hold
		// up the release. Not so on ErrLeaseNotFound above: the session's
		// lease may be the missing one, with the key on the hold's already.
		if !l.c.background(func() { l.c.revoke(l.hold.lease) }) {
			l.c.cli.Revoke(ctx, l.hold.lease) // Close has begun: not in the background
		}
		return l.c.release(ctx, l.s, l.t, rev)
	}
	l.t.moved(resp.Header.Revision)
	// The slot's key stays until the lease expires: a later use of the
	// slot would find it, and delete it, before then.
	c, s, t := l.c, l.s, l.t
	time.AfterFunc(ttl, func() { c.freeSlot(s, t) })
	return heldOn, nil
}

// grantHold grants the hold's lease, with a TTL of at least left, and
// returns that TTL. A lease that exists already is ours: an earlier grant
// of this lock's, granted no later than now with a TTL no shorter than
// left then, so it lasts at least as long.
func (l *Lock) grantHold(ctx context.Context, left time.Duration) (time.Duration, error) {
	secs := int64((left + time.Second - 1) / time.Second)
	resp, err := clientv3.RetryLeaseClient(l.c.cli).LeaseGrant(ctx,
		&pb.LeaseGrantRequest{ID: int64(l.hold.lease), TTL: secs}, grpc.WaitForReady(true))
	switch {
	case err == nil:
		secs = max(secs, resp.TTL)
	case errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist):
	default:
		return 0, fmt.Errorf("etcdlock: grant the minimum hold's lease: %w", rpctypes.Error(err))
	}
	return time.Duration(secs) * time.Second, nil
}
