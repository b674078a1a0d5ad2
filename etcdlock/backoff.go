package etcdlock

import (
	"context"
	"errors"
	"time"
)

// backoff is the pause between the attempts of a retry loop: it starts at
// min and doubles with each wait up to max. The zero d means min, so a
// backoff needs only its bounds. It belongs to one loop (no locking).
type backoff struct {
	min, max time.Duration
	d        time.Duration // the next pause; 0: min
}

// errStopped is what wait returns when its stop channel closed first: the
// caller says what that channel's closing means (the Client closed, the
// session ended).
var errStopped = errors.New("etcdlock: stopped")

// wait pauses for the current delay, or less if ctx ends (its error) or
// stop closes (errStopped; a nil stop never does), and doubles the delay
// for the next wait either way.
func (b *backoff) wait(ctx context.Context, stop <-chan struct{}) error {
	d := max(b.d, b.min)
	b.d = min(2*d, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	case <-t.C:
		return nil
	}
}

// reset makes the next pause min again, after an attempt that went well.
func (b *backoff) reset() { b.d = 0 }

// resetIfLasted resets b when the attempt begun at start lasted longer than
// max: a loop whose attempts work for a while before each failure (a watch
// that served events, then ended) starts over from min rather than waiting
// longer each time.
func (b *backoff) resetIfLasted(start time.Time) {
	if time.Since(start) > b.max {
		b.reset()
	}
}
