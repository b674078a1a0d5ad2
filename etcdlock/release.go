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

// released is how a lane's key ended.
type released int

const (
	byUs        released = iota // our request deleted it
	goneBefore                  // it was gone before: someone else deleted it
	goneMaybeUs                 // gone, by someone else or by a release of ours under NOSPACE whose reply was lost
	leaseGone                   // the lease is gone, and every key on it
	heldOn                      // moved onto a lease of its own (Lock.releaseKey): by us, but the key and the lane stay until that lease expires
)

// maxReleasePasses bounds the passes of release that find the marker moved
// by a late request of ours between reading and writing it.
const maxReleasePasses = 3

// release removes t's key, created at revision rev (0 when it is unknown
// whether the create landed), and writes the lane's marker in the same
// transaction, so that no create of this use of the lane can land later.
// Every request it sends is safe to arrive late or twice: deletes compare
// the key's create revision, marker writes only ever block creates of this
// use of the lane. On success t.mark is the marker's new mod revision. An
// error means the outcome is unknown and release may be called again.
func (c *Client) release(ctx context.Context, s *session, t *ticket, rev int64) (released, error) {
	if rev == 0 {
		r, err := c.block(ctx, s, t)
		if err != nil || r == 0 {
			return leaseOr(s, err, goneBefore)
		}
		rev = r
	}
	cmp := t.created(rev)
	for range maxReleasePasses {
		second := t.releaseSecond()
		ops := make([]clientv3.Op, 0, 2+len(second)) // one allocation
		ops = append(append(append(ops, t.releaseMark(s, rev)), second...), clientv3.OpDelete(t.key))
		resp, err := c.cli.Txn(ctx).
			If(cmp).
			Then(ops...).
			Commit()
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return c.releaseNoSpace(ctx, s, t, rev)
		}
		if err != nil {
			return leaseOr(s, err, 0)
		}
		if resp.Succeeded {
			t.moved(resp.Header.Revision)
			if secondTaken(resp) {
				return goneBefore, nil // the second key (a semaphore's slot's) was deleted by someone else
			}
			return byUs, nil
		}
		gr, err := c.cli.Get(ctx, string(t.marker))
		if err != nil {
			return leaseOr(s, err, 0)
		}
		if markedOurs(gr.Kvs, rev) { // an earlier pass of ours deleted it
			t.moved(markRev(gr.Kvs))
			return byUs, nil
		}
		// Someone else deleted the key. Move the marker all the same, unless
		// a late request of ours just did.
		resp, err = c.cli.Txn(ctx).If(t.marker.at(markRev(gr.Kvs))).Then(append(t.releaseSecond(), t.marker.put(s, markGone(rev)))...).Commit()
		if err != nil {
			return leaseOr(s, err, 0)
		}
		if resp.Succeeded {
			t.moved(resp.Header.Revision)
			return t.gone(), nil
		}
	}
	return 0, errors.New("etcdlock: marker kept moving")
}

// gone is how t's key ended when a release found it gone and the marker
// not written by a release of ours: deleted by someone else, unless a
// release of ours without the marker write (etcd out of space) may have
// deleted it, its reply lost, which nothing left in etcd can tell.
func (t *ticket) gone() released {
	if t.noSpaceSent.Load() {
		return goneMaybeUs
	}
	return goneBefore
}

// created compares t's key's create revision with rev: a release deletes
// no later use of the lane's key, which has the same name.
func (t *ticket) created(rev int64) clientv3.Cmp {
	if t.ctl.unconditionalRelease { // the controls of the request-fault tests
		return clientv3.Compare(clientv3.CreateRevision(t.key), "!=", 0)
	}
	return clientv3.Compare(clientv3.CreateRevision(t.key), "=", rev)
}

// releaseNoSpace releases t's key while etcd is out of space (its NOSPACE
// alarm refuses every write but deletes): it deletes the key, still only
// if it has create revision rev, so that the name is free for others at
// once, and leaves the marker for later: t.unmarked tells the caller to
// keep the lane until block succeeds (see freeLane), because until the
// marker moves a create of this use of the lane delivered late or twice
// could still land.
func (c *Client) releaseNoSpace(ctx context.Context, s *session, t *ticket, rev int64) (released, error) {
	t.unmarked.Store(true)
	held := t.secondStillHeld()
	resp, err := c.cli.Txn(ctx).
		If(t.created(rev)).
		Then(append(held, append(t.releaseSecond(), clientv3.OpDelete(t.key))...)...).
		Commit()
	if err != nil {
		if !refused(err) {
			t.noSpaceSent.Store(true) // it may yet have deleted the key
		}
		return leaseOr(s, err, 0)
	}
	switch {
	case !resp.Succeeded:
		return t.gone(), nil
	case len(held) > 0 && secondTaken(resp): // else the first is releaseSecond's (a claim that may not have landed)
		return goneBefore, nil // our queue key, but the second key was deleted by someone else
	}
	return byUs, nil
}

// freeLane makes t's lane free for the session's next acquisition once its
// key is gone: at once when the release moved the marker, and otherwise
// (released while etcd was out of space) once a background block has moved
// it and removed any key a late create left.
func (c *Client) freeLane(s *session, t *ticket) {
	if !t.unmarked.Load() {
		s.lanes.free(t.lane, t.mark)
		return
	}
	c.background(func() { c.retryAbandon(s, t, 0) })
}

// leaseOr turns etcd's report that the session's lease is gone into
// leaseGone (ending the session), and returns r, err otherwise.
func leaseOr(s *session, err error, r released) (released, error) {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.end(ErrLeaseExpired)
		return leaseGone, nil
	}
	return r, err
}

// abandon releases t's lane after a failed or cancelled attempt (rev as for
// release). The request runs even though ctx may have ended, bounded by the
// cleanup timeout; if it fails, it is retried in the background until it
// succeeds, fails for good, or the session ends, because the session's
// lease, renewed for the client's other locks, would otherwise keep the key,
// and with it everyone queued behind it. The lane is reused only once its
// key is known gone.
func (c *Client) abandon(ctx context.Context, s *session, t *ticket, rev int64) {
	if !c.releaseOnce(context.WithoutCancel(ctx), s, t, rev) {
		// Once closed, there is nothing to retry: Close revokes the lease,
		// and the key with it.
		c.background(func() { c.retryAbandon(s, t, rev) })
	}
}

// releaseOnce makes one bounded attempt; it reports whether there is
// nothing more to do.
func (c *Client) releaseOnce(ctx context.Context, s *session, t *ticket, rev int64) bool {
	if s.Err() != nil {
		return true // no one renews the lease: the key goes with it
	}
	cctx, cancel := context.WithTimeout(ctx, c.cleanupTimeout(t.spot))
	defer cancel()
	r, err := c.release(cctx, s, t, rev)
	if err != nil {
		return permanent(err)
	}
	if r != leaseGone {
		c.freeLane(s, t)
	}
	return true
}

// retryAbandon retries releaseOnce until it is done or the session ends.
func (c *Client) retryAbandon(s *session, t *ticket, rev int64) {
	s.retry(func() bool { c.obs.cleanupRetried(); return c.releaseOnce(s.ctx, s, t, rev) })
}

// background runs f in a goroutine that Close waits for, unless the client
// is closed; it reports whether f was started. c.mu must not be held.
func (c *Client) background(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// A Lock's release is one of two strategies: the deletion above, or, while
// a minimum hold (WithMinHold) has time left, a move of the key onto a
// lease of its own, which keeps it, with its create revision, until that
// lease expires. Lock.releaseKey chooses.

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

// UnlockNow is [Lock.Unlock] without the minimum hold ([WithMinHold]): it
// deletes the key at once, so the next waiter gets the lock now. Use it
// when the work the hold was for never began (a job whose program could
// not be started, as fencelock run does), so that a failure before the
// work does not use up the period; Unlock keeps the hold for work that
// began, however it ended. Without a minimum hold it is Unlock. After an
// Unlock, the hold stays, and UnlockNow is a second Unlock: it returns
// that Unlock's result, or, when that one failed, tries again with the
// hold (the failed Unlock's move may have landed, its reply lost, and
// the key is on the hold's lease already). It reports, retries and
// closes Done as Unlock does, and ctx bounds it the same way; safe for
// concurrent use.
func (l *Lock) UnlockNow(ctx context.Context) error {
	if err := checkCall(ctx, l == nil || l.c == nil, "Lock", "UnlockNow"); err != nil {
		return err
	}
	l.dropHold()
	return l.Unlock(ctx)
}

// dropHold removes l's minimum hold: before l was handed to the caller, or
// for UnlockNow, unless an Unlock has begun. That Unlock's move onto the
// hold's lease may have landed with its reply lost (it returned an error
// and retries in the background): a release without the hold would then
// delete the held key, and hand the lock on within the period.
func (l *Lock) dropHold() {
	l.unlockMu.Lock()
	defer l.unlockMu.Unlock()
	if !l.unlocking.Load() {
		l.hold = minHold{}
	}
}

// releaseKey is Unlock's release: it moves l's key onto a lease of its own
// while the minimum hold has time left, and deletes it otherwise. unlockMu
// is held. Every request it sends is safe to arrive late or twice: the
// lease's ID is chosen once per lock, so that a grant whose reply was lost
// is found again ("lease already exists") instead of granted twice, and
// the move compares the key's create revision with the token, so that it
// moves no other acquisition's key (a later use of the same session lane
// reuses the key's name), and writes the lane's marker as a release does.
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
	// The lane's key stays until the lease expires: a later use of the
	// lane would find it, and delete it, before then.
	c, s, t := l.c, l.s, l.t
	time.AfterFunc(ttl, func() { c.freeLane(s, t) })
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

// block writes t's marker, so that a create of this use of the lane whose
// outcome is unknown can no longer land, and returns the create revision of
// the lane's key if it exists: the create landed (no one else writes keys
// of this session's lanes), and the key is ours to delete.
//
// The marker is written only while it is at t.mark, the revision this use's
// last create compared: if it has moved, that create can no longer land
// anyway, and an unconditional write delivered late (after the lane was
// reused) would overwrite the tag of a later use's release, which then
// takes its own deletion for someone else's.
func (c *Client) block(ctx context.Context, s *session, t *ticket) (int64, error) {
	resp, err := c.cli.Txn(ctx).
		If(t.marker.at(t.mark)).
		Then(t.marker.put(s, markNone), clientv3.OpGet(t.key)).
		Else(t.marker.get(), clientv3.OpGet(t.key)).
		Commit()
	if err != nil {
		return 0, err
	}
	t.unmarked.Store(false) // moved now, or before: no create of this use can land
	if resp.Succeeded {
		t.mark = resp.Header.Revision
	} else if m := markRev(resp.Responses[0].GetResponseRange().Kvs); m != 0 {
		t.mark = m
	}
	if k := resp.Responses[1].GetResponseRange().Kvs; len(k) > 0 {
		return k[0].CreateRevision, nil
	}
	return 0, nil
}

// secondTaken reports whether a release's response, whose first operation
// was releaseMark's or secondStillHeld's, says the second key had been
// deleted (false when the first was neither: a delete's response).
func secondTaken(resp *clientv3.TxnResponse) bool {
	n := resp.Responses[0].GetResponseTxn()
	return n != nil && !n.Succeeded
}
