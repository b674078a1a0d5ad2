package redisholder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"

	"github.com/fencelock/fencelock/fence"
)

// Token returns the lock's fencing token, issued by the counter while the
// lock was held: each acquisition of the key gets a higher one.
func (l *Lock) Token() fence.Token { return l.token }

// Done returns a channel closed once the lock's validity deadline has
// passed, a [Lock.Refresh] failed, or [Lock.Release] was called.
func (l *Lock) Done() <-chan struct{} { return l.done }

// ValidUntil returns the validity deadline: the lock's key outlives it
// (measured from before the request that set the key's TTL). It carries
// a monotonic clock reading. For a key without a TTL it is far in the
// future.
func (l *Lock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.until.IsZero() {
		return farFuture
	}
	return l.until
}

// farFuture is the deadline of a key with no TTL.
var farFuture = time.Now().Add(100 * 365 * 24 * time.Hour)

// Lock returns the redislock lock; refreshing or releasing it other than
// through [Lock.Refresh] and [Lock.Release] leaves Done closing at the
// deadline it knows.
func (l *Lock) Lock() *redislock.Lock { return l.lock }

// Refresh extends the lock's TTL to ttl from now (redislock's Refresh)
// and moves the deadline to ttl after the request was sent. Any failure
// closes Done, since the lock may be gone: redislock.ErrNotObtained (the
// key is no longer ours) is returned wrapped with [ErrNotHeld]. After Done
// is closed Refresh returns [ErrEnded] and sends nothing. ctx bounds the
// request; one that has ended already gives its error, and Done stays
// as it was. Concurrent Refreshes take turns.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case ttl < time.Millisecond: // redislock would send PEXPIRE 0, which deletes the key
		return fmt.Errorf("%w: TTL %v (must be at least 1ms: redislock sends whole milliseconds)", ErrInvalidArgument, ttl)
	}
	if err := ctx.Err(); err != nil {
		return err // before any I/O: the lock is as it was
	}
	l.refreshing.Lock()
	defer l.refreshing.Unlock()
	if l.isEnded() {
		return ErrEnded
	}
	before := time.Now()
	err := l.lock.Refresh(ctx, ttl, nil)
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		l.end()
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.lock.Key(), err)
	case err != nil:
		l.end()
		return fmt.Errorf("redisholder: refreshing %q (the lock is given up): %w", l.lock.Key(), err)
	}
	if !l.setUntil(before.Add(ttl.Truncate(time.Millisecond))) { // as redislock sends it
		return fmt.Errorf("%w: the deadline passed before the refresh's reply", ErrEnded)
	}
	return nil
}

// Release closes Done and releases the lock (redislock's Release: only
// if its key still holds the lock's value). ctx bounds the request.
func (l *Lock) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	l.end()
	if err := l.lock.Release(ctx); err != nil {
		return fmt.Errorf("redisholder: releasing %q: %w", l.lock.Key(), err)
	}
	return nil
}

// setUntil moves the deadline to until (zero: none) and arms the timer
// that closes Done then. It reports false if Done is closed already.
func (l *Lock) setUntil(until time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.until = until
	if !until.IsZero() {
		l.timer = time.AfterFunc(time.Until(until), l.end)
	}
	return true
}

// end closes Done, once.
func (l *Lock) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	close(l.done)
}

func (l *Lock) isEnded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// Issuer names the source of the lock's tokens ([fence.IssuerNamer]):
// "redis:" and the counter's key, or the name [WithIssuer] gave. A store
// that checks issuers refuses its tokens on a key that accepted another
// issuer's.
func (l *Lock) Issuer() string { return l.issuer }
