package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RunOption configures [Client.Run].
type RunOption interface {
	applyRun(*runOptions)
}

type runOptions struct {
	onError     func(error)
	health      *LeaderHealth
	healthGiven bool
}

type runOptionFunc func(*runOptions)

func (f runOptionFunc) applyRun(o *runOptions) { f(o) }

// WithErrorHandler makes [Client.Run] pass the errors of lead, and of
// campaigns and resignations that failed for a reason that may pass, to h
// and keep going, instead of returning lead's first error. h is called from
// Run's goroutine. Default: none; Run returns lead's first error and retries
// failed campaigns quietly.
func WithErrorHandler(h func(error)) RunOption {
	return runOptionFunc(func(o *runOptions) { o.onError = h })
}

// WithLeaderHealth makes [Client.Run] record in h when each lead function
// starts, when its context is cancelled, and when it returns, so that h
// reports a leader that runs past its term ([LeaderHealth]). Default: none.
// A nil h makes Run fail.
func WithLeaderHealth(h *LeaderHealth) RunOption {
	return runOptionFunc(func(o *runOptions) { o.health, o.healthGiven = h, true })
}

func runOptionsOf(opts []RunOption) (runOptions, error) {
	var o runOptions
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil RunOption", ErrInvalidOption)
		}
		opt.applyRun(&o)
	}
	if o.healthGiven && o.health == nil {
		return o, fmt.Errorf("%w: nil LeaderHealth", ErrInvalidOption)
	}
	return o, nil
}

// Run keeps this process a candidate in the election called name and calls
// lead each time it wins, until ctx ends: the run loop of "one active
// instance". Each round it campaigns ([Client.Campaign] with value), calls
// lead with the term and a context that is cancelled when the term ends
// (lost, its validity deadline passed, or the Client closed:
// context.Cause tells which), resigns when lead returns (also when it
// panics: the panic goes on after the resignation), and campaigns again.
//
// lead should stop when its context is cancelled, and write only through a
// [fence.Guard] of the term, so that a resource refuses the writes of a
// term that ended while lead was paused. [WithLeaderHealth] reports a lead
// that does not stop, for a liveness probe.
//
// Run returns ctx's error once ctx ends; [ErrClosed] when the Client is
// closed; at once, an error for invalid arguments (nil ctx or lead, an
// invalid name, a value longer than [MaxDataLen], a nil option or
// LeaderHealth) and for a campaign etcd refuses for good (a
// [*PermissionError]); and lead's error when lead returns one while its
// term and ctx last, unless [WithErrorHandler] is given. A campaign that fails for another reason
// (etcd unreachable, the session lost while waiting), and a term whose lead
// returned an error passed to the handler, are followed by a pause that
// doubles from 100 ms to 5 s (reset by a term whose lead returned nil), so
// that a lead that fails at once steps aside instead of campaigning and
// resigning in a tight loop. A lead that returns nil is taken to have
// finished its work: Run campaigns again at once (lead should wait for its
// work, or for its context, rather than return nil at once).
func (c *Client) Run(ctx context.Context, name, value string, lead func(context.Context, *Term) error, opts ...RunOption) error {
	if err := c.checkCall(ctx, "Run"); err != nil {
		return err
	}
	if lead == nil {
		return fmt.Errorf("%w: Run: nil lead function", ErrInvalidArgument)
	}
	o, err := runOptionsOf(opts)
	if err != nil {
		return err
	}
	report := func(err error) error {
		if o.onError == nil {
			return err
		}
		o.onError(err)
		return nil
	}
	b := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	for {
		t, err := c.Campaign(ctx, name, value)
		failed := err != nil
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && runFatal(err):
			return err
		case err != nil:
			report(err)
		default:
			if failed, err = c.lead(ctx, t, lead, report, o.health); err != nil {
				return err
			}
		}
		if !failed {
			b.reset()
			continue
		}
		switch err := b.wait(ctx, c.life.Done()); {
		case errors.Is(err, errStopped):
			return ErrClosed
		case err != nil:
			return err
		}
	}
}

// lead runs one term: it calls f, then resigns. failed reports whether f
// returned an error while the term and ctx lasted; err is that error if
// report passed it on. h (nil: none) learns when f starts, when its context
// is cancelled and when it returns (or panics), before the resignation.
func (c *Client) lead(ctx context.Context, t *Term, f func(context.Context, *Term) error, report func(error) error, h *LeaderHealth) (failed bool, err error) {
	tctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-t.Done():
			cancel(wrapLost(t.Err(), "etcdlock: term %d of %q ended: ", t.Token(), t.Name()))
		case <-tctx.Done():
		}
	}()
	defer func() {
		cancel(nil)
		<-watched
	}()
	returned := false
	defer func() {
		if !returned { // f panicked (the panic goes on) or called runtime.Goexit
			c.resign(ctx, t)
		}
	}()
	fReturned := h.track(tctx, t)
	defer fReturned()
	ferr := f(tctx, t)
	fReturned()
	returned = true
	ended := t.Err() != nil || ctx.Err() != nil
	if rerr := c.resign(ctx, t); rerr != nil && !ended {
		report(rerr)
	}
	if ferr != nil && !ended {
		return true, report(fmt.Errorf("etcdlock: Run %q, term %d: %w", t.Name(), t.Token(), ferr))
	}
	return false, nil
}

// resign resigns t, bounded by the cleanup timeout even when ctx has ended,
// and by the session: once it has ended, no one renews the lease, and its
// keys go with it (so the next campaign need not wait on a cut link).
func (c *Client) resign(ctx context.Context, t *Term) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.cleanupTimeout)
	defer cancel()
	defer context.AfterFunc(t.l.s.ctx, cancel)()
	return t.Resign(rctx)
}

// runFatal reports whether a campaign's error will not pass by retrying.
func runFatal(err error) bool {
	var pe *PermissionError
	return errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) || errors.As(err, &pe) || permanent(err)
}
