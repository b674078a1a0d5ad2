package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// Lock is one held acquisition of a named lock. It is a [fence.Holder] and a
// [fence.Expirer], so [fence.NewGuard] accepts it.
//
// A Lock is safe for concurrent use. It is created by [Client.Lock],
// [Client.TryLock], [Client.RLock], [Client.TryRLock], a [Semaphore]'s
// Acquire and TryAcquire, and [Client.LockAll]; the zero Lock is not usable.
type Lock struct {
	// Set by newLock, read-only after.
	c        *Client
	s        *session
	t        *ticket
	token    fence.Token
	acquired time.Time // for the hold duration; zero when no SDK records it (telemetry.holdStart)
	done     chan struct{}
	hold     minHold // WithMinHold (release.go); set before the caller gets l

	mu   sync.Mutex         // guards the three fields below
	err  error              // why done was closed; set once, before done is closed (closeDone)
	lctx context.Context    // life's; nil until it is first asked for
	stop context.CancelFunc // ends lctx

	unlockMu  sync.Mutex // guards the three fields below, and is held through a release
	unlocked  bool       // released: unlockErr is Unlock's answer
	unlockErr error      // nil, or why the lock was lost before its release
	retrying  bool       // a background release is running

	unlocking atomic.Bool // a deletion seen from now on may be our own
	gaveUp    atomic.Bool // etcd refused the release for good (permission): it never landed

	kw keyWatch // the watch of the key; its fields say what guards them
}

// newLock registers the lock with its session, which closes its Done when
// the session ends, and starts the key watch's timer (see watchDelay); it
// fails with ErrClosed once Close has begun, so that no watch starts while
// Close waits for them, and with the session's cause once the session
// ended.
func newLock(c *Client, s *session, t *ticket, token fence.Token) (*Lock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	l := &Lock{c: c, s: s, t: t, token: token, acquired: c.obs.holdStart(), done: make(chan struct{})}
	l.kw.backoff = watchBackoff()
	l.kw.w = watch{key: t.holdKey(), token: int64(token), sink: l}
	if !t.noWatch {
		c.wg.Add(1)
		l.kw.timer = time.AfterFunc(watchDelay, l.startWatch)
	}
	if err := s.addLock(l); err != nil {
		// The session ended since the caller checked: the lock would be
		// returned lost, and Lock never returns a lost lock. Ending it
		// ends its life too, should the watch's timer have fired.
		l.closeDone(err)
		l.stopWatch()
		return nil, fmt.Errorf("etcdlock: %q: %w", t.name, sessionCause(err))
	}
	return l, nil
}

// stopWatch stops the key watch, or keeps it from starting; l's life has
// ended.
func (l *Lock) stopWatch() {
	if l.kw.timer == nil {
		return
	}
	if l.kw.timer.Stop() {
		// The watch never started, and never will: there is nothing to
		// remove, nor a reason to take the watcher's mutex, which every
		// lock of the Client shares.
		l.c.wg.Done()
		return
	}
	l.c.watches.remove(&l.kw.w)
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.t.name }

// Key returns the etcd key of this acquisition. While the lock is held no
// other acquisition uses it, but a later acquisition by the same Client may
// reuse it after Unlock: use Token to identify an acquisition.
func (l *Lock) Key() string { return l.t.key }

// Token returns the fencing token: the create revision of the lock's key. It
// is unique to this acquisition, strictly greater than the token of every
// earlier holder of the same name, and comparable across names (all come from
// etcd's single revision counter). A semaphore's permit's token is its
// slot's key's instead: greater than every earlier holder's of the same
// slot (see [Semaphore]).
func (l *Lock) Token() fence.Token { return l.token }

// Issuer returns the name of the source of the lock's token, as
// [WithIssuer] set it on its Client; "" (none) by default. It makes a
// Lock a [fence.IssuerNamer].
func (l *Lock) Issuer() string { return l.c.o.issuer }

var _ fence.IssuerNamer = (*Lock)(nil)

// Lease returns the ID of the session lease the lock's key is attached to.
func (l *Lock) Lease() clientv3.LeaseID { return l.s.id }

// TTL returns the lease TTL etcd granted, which may exceed the one requested.
func (l *Lock) TTL() time.Duration { return l.s.ttl }

// ValidUntil returns the instant, on this process's monotonic clock, up to
// which the lease is known to be alive: the send time of the last keepalive
// etcd acknowledged plus the granted TTL. etcd cannot have expired the lease
// before then, provided this machine's clock does not run slower than the etcd
// leader's (clock rates, not wall-clock offsets, matter). After it passes with
// no newer acknowledgement, Done is closed. It says nothing about whether the
// lock was released or its key deleted: watch Done for that.
//
// The deadline is measured on a clock that counts the time the machine was
// suspended (CLOCK_BOOTTIME on Linux), and returned as an instant of Go's
// monotonic clock, computed at each call: after a suspend longer than what
// was left, ValidUntil returns an instant already past, and Done closes
// within half a second of the resume. An instant it returned before a
// suspend still lies as far ahead after it (Go's clock did not count the
// sleep): compare a fresh ValidUntil each time, as [fence.Guard] does,
// rather than one kept.
func (l *Lock) ValidUntil() time.Time { return l.s.until() }

// Done returns a channel that is closed when the lock is lost or may be lost
// (the lease expired or was revoked, the validity deadline passed without a
// keepalive acknowledgement, the key was deleted by someone else, the Client
// was closed) and when Unlock succeeds. Err tells which. Loss of the lease is
// noticed by the validity deadline at the latest; a deletion of the key by
// someone else within about 150 ms (the key is watched from 50 ms after the
// acquisition, so that short critical sections pay for no watch, on one
// stream for all the Client's locks; not at all for a lock taken
// [WithoutKeyWatch]). Work protected by the lock should
// stop when Done is closed; writes should in any case go through a
// [fence.Guard] so the resource can refuse them.
//
// The end is counted and logged (see [WithMeterProvider], [WithLogger])
// just after Done is closed: when a session ends, after the Done of every
// lock it held, so that none waits for the others' telemetry.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns nil while the lock is held. After Done is closed it returns
// [ErrUnlocked], [ErrClosed], or an error matching [ErrLost] that also
// matches its cause ([ErrLeaseExpired], [ErrValidityExpired], [ErrKeyDeleted]).
//
// When the key watch sees the key deleted, Done closes at once, and the
// cause takes one more request to etcd (was the lease revoked or expired,
// or did someone delete the key?). Reading the error in that time, with its
// Error method or [errors.Is], waits for that request, at most a second;
// if it gets no answer the cause is [ErrKeyDeleted].
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// event names l for its observer (engine_observer.go).
func (l *Lock) event() lockEvent {
	return lockEvent{kind: l.t.kind, name: l.t.name, token: l.token, lease: l.s.id}
}

// end ends the lock with cause, unless it ended already: it records the
// cause, closes done, stops the key watch and accounts for the end.
func (l *Lock) end(cause error) {
	if l.closeDone(cause) {
		l.s.removeLock(l)
		l.afterEnd(cause)
	}
}

// afterEnd follows the first closeDone (end, or the end of the session):
// it stops the key watch and counts and logs the end.
func (l *Lock) afterEnd(cause error) {
	l.stopWatch()
	l.c.obs.lockEnded(lockEndEvent{lockEvent: l.event(), acquired: l.acquired, cause: cause, owner: l.c.o.owner})
}

// closeDone records cause, closes done and ends lctx, unless an earlier
// cause was; it reports whether this was the first. The caller then calls
// afterEnd.
func (l *Lock) closeDone(cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = cause
	close(l.done)
	if l.stop != nil {
		l.stop()
	}
	return true
}

// life returns a context that ends when done is closed: it bounds the key
// watch's requests, Do's work and a Term's Proclaim, and tells a MultiLock
// and a group's worker of the lock's end. It is made when first asked for,
// so that a lock released before its key is watched (see watchDelay) makes
// none; asked for once the lock has ended, it has ended already.
func (l *Lock) life() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lctx == nil {
		l.lctx, l.stop = context.WithCancel(context.Background())
		if l.err != nil {
			l.stop()
		}
	}
	return l.lctx
}

// Unlock releases the lock: it deletes the lock's key only while the key's
// create revision still equals the token, so it never deletes another
// holder's key, also when it arrives late or twice.
//
// It returns nil when this lock's key was deleted by this Unlock or an
// earlier one (Unlock is idempotent), and an error matching [ErrLost] (or
// [ErrClosed]) when the lock had been lost before its key was deleted: the
// lease expired, or someone else deleted the key. One case it cannot tell:
// while etcd is out of space (its NOSPACE alarm refuses the marker write
// that records our deletion), a release whose reply was lost and a retry
// that finds the key gone; that error matches [ErrKeyDeleted] and
// [fence.ErrUnknownOutcome] both.
//
// ctx bounds the request: give it a deadline, as etcd may be unreachable.
// When the request fails, Unlock returns its error and keeps trying in the
// background (until it succeeds, fails for good, or the session ends), so
// a failed Unlock does not keep the lock from others while the Client keeps
// the session alive; Done closes once the outcome is known, and a later
// Unlock returns it. Either way the lock's token stays fenced off by any
// newer holder's.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := checkCall(ctx, l == nil || l.c == nil, "Lock", "Unlock"); err != nil {
		return err
	}
	ctx, o := l.c.obs.releaseStart(ctx, l.event())
	err := l.unlock(ctx)
	l.c.obs.releaseEnd(o, releaseEndEvent{err: err, pending: err != nil && unsettled(err)})
	return err
}

func (l *Lock) unlock(ctx context.Context) error {
	l.unlockMu.Lock()
	defer l.unlockMu.Unlock()
	if l.unlocked {
		return l.unlockErr
	}
	l.unlocking.Store(true)
	r, err := l.releaseKey(ctx)
	if err != nil {
		l.c.obs.releaseFailed(l.event(), err)
		if permanent(err) {
			l.gaveUp.Store(true)
			return fmt.Errorf("etcdlock: release %q: %w", l.t.name, l.c.explain(err))
		}
		l.retryUnlock()
		return fmt.Errorf("etcdlock: release %q (retrying in the background): %w", l.t.name, err)
	}
	l.settle(r)
	return l.unlockErr
}

// settle records the release's outcome; unlockMu is held.
func (l *Lock) settle(r released) {
	lostBefore := l.Err()
	// The release's end is recorded as the sentinel itself; comparing, not
	// errors.Is, never waits for a loss's cause still being found out.
	if lostBefore == l.t.ended() {
		lostBefore = nil
	}
	l.unlocked = true
	switch r {
	case byUs:
		l.c.freeLane(l.s, l.t)
		lostBefore = nil // the key was still ours: nothing was lost
	case heldOn: // moved onto its own lease (Lock.releaseKey), which frees the lane later
		lostBefore = nil
	case goneBefore:
		l.c.freeLane(l.s, l.t)
		if lostBefore == nil {
			lostBefore = lost(ErrKeyDeleted)
		}
	case goneMaybeUs:
		// Reported as lost, the safe side, but not as a certainty.
		l.c.freeLane(l.s, l.t)
		if lostBefore == nil {
			lostBefore = lost(errKeyDeletedMaybeUs)
		}
	case leaseGone:
		if lostBefore == nil {
			lostBefore = lost(ErrLeaseExpired)
		}
	}
	if lostBefore != nil {
		l.unlockErr = wrapLost(lostBefore, "etcdlock: release %q: ", l.t.name)
		l.end(lostBefore)
	}
	l.end(l.t.ended())
}

// retryUnlock starts the background release after a failed Unlock, unless
// it runs already; unlockMu is held.
func (l *Lock) retryUnlock() {
	if l.retrying {
		return
	}
	l.retrying = l.c.background(func() {
		// Should the session end first, it closes Done with its cause.
		l.s.retry(func() bool { l.c.obs.cleanupRetried(); return l.tryUnlock() })
	})
}

// tryUnlock is one bounded background release; it reports whether there is
// nothing more to do.
func (l *Lock) tryUnlock() bool {
	if !l.unlockMu.TryLock() {
		return false // an Unlock call is at it; don't hold up Close
	}
	defer l.unlockMu.Unlock()
	if l.unlocked {
		return true
	}
	ctx, cancel := context.WithTimeout(l.s.ctx, l.c.cleanupTimeout(l.t.spot))
	defer cancel()
	r, err := l.releaseKey(ctx)
	if err != nil {
		if permanent(err) {
			l.gaveUp.Store(true)
			return true
		}
		return false
	}
	l.settle(r)
	return true
}

// goneCause tells why the key went when Unlock was not called: etcd
// deletes it when it expires or revokes the lease, which the watch may
// report before the session's next keepalive would, so the lease is asked
// about (for at most lookup, from when Done was already closed). It returns
// the session's end (ErrLeaseExpired when the lookup found the lease gone),
// or ErrKeyDeleted: someone deleted the key, or the lookup could not tell.
func (l *Lock) goneCause(lookup time.Duration) error {
	if l.s.Err() == nil {
		// On the session's context: Close, which ends it and then waits
		// for this goroutine, need not wait the lookup out.
		ctx, cancel := context.WithTimeout(l.s.ctx, lookup)
		resp, err := l.c.cli.TimeToLive(ctx, l.s.id)
		cancel()
		// etcd answers -1 for a lease it does not have; a live lease with
		// under a second left answers 0.
		if err == nil && resp.TTL < 0 {
			l.s.end(ErrLeaseExpired)
		}
	}
	// A Close after Done closed (in reaction to the loss, say) is not why
	// the key went, and its revoke leaves the lookup unable to tell.
	if err := l.s.Err(); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return ErrKeyDeleted
}

// pendingCause is the cause of a lock's loss while it is being found out:
// the key watch saw the key deleted, Done is closed at once, and the lease
// lookup that tells an expiry from a deletion by someone else (goneCause)
// follows. Error and Unwrap wait for it, at most the lookup's second, so
// that Err, [context.Cause] of Do's context and MultiLock.Err, which all
// carry this value, name the same cause however early they are read.
type pendingCause struct {
	settled chan struct{}
	cause   error // set before settled is closed
}

func (p *pendingCause) settle(cause error) {
	p.cause = cause
	close(p.settled)
}

func (p *pendingCause) wait() error {
	<-p.settled
	return p.cause
}

// unsettled reports whether err carries a pendingCause not yet settled,
// whose Error, Unwrap and errors.Is through it would wait. It does not
// wait: errors.As stops at the pendingCause, before its Unwrap.
func unsettled(err error) bool {
	var p *pendingCause
	if !errors.As(err, &p) {
		return false
	}
	select {
	case <-p.settled:
		return false
	default:
		return true
	}
}

func (p *pendingCause) Error() string { return p.wait().Error() }
func (p *pendingCause) Unwrap() error { return p.wait() }

// unlockedOrDeleted tells, once Unlock was called and the key is gone,
// whether our release deleted it (it wrote the lane's marker with our token
// in the same transaction) or someone else did; while the lane is ours only
// our own requests write its marker. nil when it cannot tell: the release,
// retrying in the background, will.
func (l *Lock) unlockedOrDeleted(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := l.c.cli.Get(tctx, string(l.t.marker))
	switch {
	case err != nil && l.gaveUp.Load():
		// etcd refused our release for good, so it was not ours.
		return lost(fmt.Errorf("%w (and the marker could not be read: %v)", ErrKeyDeleted, err))
	case err != nil:
		return nil
	case markedOurs(resp.Kvs, l.t.rev):
		return l.t.ended()
	case l.t.unmarked.Load():
		return nil // released while etcd was out of space: the release tells
	case len(resp.Kvs) == 0:
		// The lane's marker was never written, or the lease went with it.
		if ttl, err := l.c.cli.TimeToLive(tctx, l.s.id); err != nil || ttl.TTL < 0 {
			return nil // the session tells
		}
	}
	return lost(ErrKeyDeleted)
}

// Held returns a comparison that holds while the lock's key exists with the
// lock's token as its create revision: put it in the If of a transaction
// on the same etcd cluster, and the transaction's Then applies only while
// the lock is held, in the same raft entry as the check. It is the
// strongest fence etcd offers for the holder's own etcd writes: a Txn sent
// by a deposed holder, or one that arrives late, after the lock was lost
// or released, takes its Else branch (Succeeded false) and changes
// nothing the Then would have. Held is valid after the lock has ended too
// (it then never holds).
//
//	resp, err := cli.Txn(ctx).If(lock.Held()).Then(clientv3.OpPut("/config/leader", addr)).Commit()
//	// err == nil && !resp.Succeeded: the lock was no longer held; nothing was written.
func (l *Lock) Held() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.t.holdKey()), "=", int64(l.token))
}
