package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// run is one [Dispatcher.Run]: its guard, scope and fence, and the
// resources whose head effect waits for a retry.
type run struct {
	d     *Dispatcher
	g     *fence.Guard
	scope Scope
	by    fence.Claim

	mu    sync.Mutex        // guards retry
	retry map[string]*retry // by resource
}

// retry is a resource's head effect that failed and waits.
type retry struct {
	key      string // the effect's Key
	attempts int
	next     time.Time
}

// loop runs rounds until the lock is lost, ctx ends or the dispatcher is
// deposed.
func (r *run) loop(ctx context.Context) error {
	var wake <-chan struct{}
	backoff := r.d.o.minBackoff
	for {
		if wake == nil {
			wake = r.watch(ctx)
		}
		if err := r.g.Check(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		full, err := r.round(ctx)
		switch {
		case errors.Is(err, fence.ErrStale), errors.Is(err, fence.ErrLockLost):
			return err
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			r.report(Effect{}, err)
			wait(ctx, jitter(backoff))
			backoff = min(2*backoff, r.d.o.maxBackoff)
			continue
		}
		backoff = r.d.o.minBackoff
		if full {
			continue
		}
		wake = r.idle(ctx, wake)
	}
}

// idle waits for a wake-up, the poll interval or the next retry, and
// returns the watch channel, nil once it has closed.
func (r *run) idle(ctx context.Context, wake <-chan struct{}) <-chan struct{} {
	d := min(r.d.o.poll, r.nextRetry())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case _, ok := <-wake:
		if !ok {
			// The watch broke: poll until the interval is out before
			// watching again, so that a watch that breaks at once (a
			// server dropping the listening connection) is not a tight
			// loop of reads and watches.
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			return nil
		}
	}
	return wake
}

// watch starts the log's watch, if it has one; nil (poll) otherwise or
// when it fails.
func (r *run) watch(ctx context.Context) <-chan struct{} {
	w, ok := r.d.log.(Watcher)
	if !ok {
		return nil
	}
	ch, err := w.Watch(ctx, r.scope)
	if err != nil {
		r.report(Effect{}, fmt.Errorf("outbox: watch (polling every %v meanwhile): %w", r.d.o.poll, err))
		return nil
	}
	return ch
}

// nextRetry returns how long until the earliest waiting retry is due.
func (r *run) nextRetry() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.d.o.poll
	for _, w := range r.retry {
		d = min(d, time.Until(w.next))
	}
	return max(d, time.Millisecond)
}

// round reads a batch, delivers it and settles what it delivered or
// parked in one write. full reports that the batch was full.
func (r *run) round(ctx context.Context) (full bool, err error) {
	effects, err := r.d.log.Pending(ctx, r.scope, r.waiting(), r.d.o.batch)
	if err != nil {
		return false, fmt.Errorf("outbox: reading pending effects: %w", err)
	}
	if len(effects) == 0 {
		return false, nil
	}
	done, lost := r.deliver(ctx, effects)
	if err := r.settle(ctx, done); err != nil {
		return false, err
	}
	if lost != nil {
		return false, lost
	}
	return len(effects) == r.d.o.batch, nil
}

// waiting returns the resources whose head effect waits for a retry that
// is not due yet; a due one is read again, its attempts kept until it is
// delivered or parked.
func (r *run) waiting() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var skip []string
	now := time.Now()
	for res, w := range r.retry {
		if now.Before(w.next) {
			skip = append(skip, res)
		}
	}
	return skip
}

// settle marks done, fenced on the dispatcher's resource; nil done takes
// the resource over.
func (r *run) settle(ctx context.Context, done []Settled) error {
	if len(done) == 0 && done != nil {
		return nil
	}
	if err := r.g.Check(); err != nil {
		return err // the next dispatcher sends them again
	}
	err := r.d.log.Settle(ctx, r.by, done)
	if errors.Is(err, fence.ErrStale) {
		return fmt.Errorf("outbox: dispatcher %s with token %d deposed: %w", r.by.Resource, r.by.Token, err)
	}
	if err != nil {
		return fmt.Errorf("outbox: marking %d effects: %w", len(done), err)
	}
	return nil
}

func (r *run) report(e Effect, err error) {
	if f := r.d.o.onError; f != nil {
		f(e, err)
	}
}

func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
