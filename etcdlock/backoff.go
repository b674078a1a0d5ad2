package etcdlock

import (
	"context"
	"errors"
	"time"
)

// backoff is the pause between a retry loop's attempts: min, doubled by
// each wait up to max. d, the next pause, is 0 (min) in a new backoff. It
// belongs to one loop (no locking).
type backoff struct{ min, max, d time.Duration }

// errStopped is what wait returns when stop closed first: the caller says
// what that means (the Client closed, the session ended).
var errStopped = errors.New("etcdlock: stopped")

// wait pauses for d, or less if ctx ends (its error) or stop closes
// (errStopped; a nil stop never does), and doubles d either way.
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
// max: a loop whose attempts work a while before failing (a watch that
// served events) starts over from min.
func (b *backoff) resetIfLasted(start time.Time) {
	if time.Since(start) > b.max {
		b.reset()
	}
}

const (
	minWatchBackoff = 10 * time.Millisecond
	maxWatchBackoff = time.Second
)

// watchBackoff is the pause between the attempts of a watch loop.
func watchBackoff() backoff { return backoff{min: minWatchBackoff, max: maxWatchBackoff} }
