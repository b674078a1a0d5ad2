package etcdlock

import (
	"context"
	"errors"
	"fmt"
)

// Do acquires the lock named name as [Client.Lock] does, runs fn while it is
// held, and releases it when fn returns or panics.
//
// ctx bounds the whole call: the wait for the lock and fn's work (give it
// no deadline shorter than the work needs). fn's context is done when ctx
// is, and as soon as the lock is lost or may be lost (when its Done
// closes: the lease expired or was revoked, the validity deadline passed,
// the key was deleted, the Client was closed); [context.Cause] of it then
// returns the lock's [Lock.Err]. fn should stop
// its work when its context is done, and write through a [fence.Guard] of
// the lock it is given, so that the resource refuses what it writes late.
//
// The release is bounded by the cleanup timeout ([WithCleanupTimeout]),
// also when ctx has ended, and fails as [Lock.Unlock] does (retried in the
// background). Do returns:
//   - the error of Lock when the lock was not acquired (fn did not run);
//   - when the lock ended before fn returned, an error matching the lock's
//     Err ([ErrLost] and the loss's cause, or [ErrClosed]) and fn's error,
//     if it returned one: fn's result came from a hold that ended early,
//     and whatever it did after the loss was not protected by the lock;
//   - otherwise fn's error, or, if fn returned nil, the release's error
//     when the release failed (nil once the key is deleted, and when the
//     lock was lost only after fn returned).
//
// A panic in fn is passed on after the release.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lock) error, opts ...LockOption) error {
	if err := c.checkCall(ctx, "Do"); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Do: nil function", ErrInvalidArgument)
	}
	l, err := c.Lock(ctx, name, opts...)
	if err != nil {
		return err
	}
	return l.do(ctx, fn)
}

// do runs fn under l (see Client.Do) and releases l, also when fn panics.
func (l *Lock) do(ctx context.Context, fn func(context.Context, *Lock) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.life(), func() { cancel(l.Err()) })
	defer stop()
	released := false
	defer func() {
		if !released { // fn panicked
			l.unlockBounded(ctx)
		}
	}()
	ferr := fn(fctx, l)
	lostDuring := l.Err() // nil: held, as far as this process knows, until fn returned
	released = true
	uerr := l.unlockBounded(ctx)
	switch {
	case lostDuring != nil:
		return wrapLost(errors.Join(lostDuring, ferr), "etcdlock: Do %q: the lock ended before its work did: ", l.t.name)
	case ferr != nil:
		return ferr
	case errors.Is(uerr, ErrLost) || errors.Is(uerr, ErrClosed):
		return nil // lost after fn returned: its work was done under the lock
	}
	return uerr
}

// unlockBounded unlocks l, bounded by the cleanup timeout (or by its
// acquisition's bound, spot.bound, when shorter), also when ctx ended.
func (l *Lock) unlockBounded(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.c.cleanupTimeout(l.t.spot))
	defer cancel()
	return l.Unlock(rctx)
}
