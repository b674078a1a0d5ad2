package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Dispatcher delivers the effects recorded in a [Log], at least once and
// in order per resource, through a [Sender], while it holds a lock: run it
// as a lock's holder ([Dispatcher.Run] with an *etcdlock.Lock) or as an
// etcdlock.Group's partition owner (with the *etcdlock.Partition and the
// partition's [Scope]), so that one dispatcher at a time delivers each
// effect and a fleet shares the work.
//
// It marks each effect delivered, or parked, with its own token, in a
// write the store fences on the dispatcher's resource
// ([Dispatcher.Resource]); it takes that resource over before it sends
// anything. So once a newer dispatcher has started, an older one (paused
// past its lease, cut off) marks nothing; and it sends nothing further
// either, as it checks its lock's validity before each delivery. The one
// delivery it may have under way when it is deposed arrives late or
// twice, never out of the receiver's sight: the receiver deduplicates on
// [Effect.Key] ([NewReceiver]), and the next dispatcher redelivers what
// the old one sent but did not mark.
//
// A Dispatcher is safe for concurrent use; several Run calls with
// different scopes share it. Create one with [NewDispatcher].
type Dispatcher struct {
	log    Log
	sender Sender
	o      options
	tel    *telemetry
}

// NewDispatcher returns a dispatcher of log's effects through s. It fails
// with an error matching [fence.ErrInvalidArgument] when log or s is nil
// (also a nil pointer in the interface) or an option is nil or invalid.
func NewDispatcher(log Log, s Sender, opts ...Option) (*Dispatcher, error) {
	if nilcheck.IsNil(log) {
		return nil, fmt.Errorf("%w: outbox: NewDispatcher: nil Log", fence.ErrInvalidArgument)
	}
	if nilcheck.IsNil(s) {
		return nil, fmt.Errorf("%w: outbox: NewDispatcher: nil Sender", fence.ErrInvalidArgument)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: outbox: NewDispatcher: nil Option", fence.ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	t, err := newTelemetry(o.mp, o.tp)
	if err != nil {
		return nil, fmt.Errorf("outbox: NewDispatcher: telemetry: %w", err)
	}
	return &Dispatcher{log: log, sender: s, o: o, tel: t}, nil
}

// Resource returns the resource the dispatcher's marks are fenced on for
// scope: "fencelock-outbox/NAME/INDEX/PARTITIONS".
func (d *Dispatcher) Resource(scope Scope) string {
	return "fencelock-outbox/" + d.o.name + "/" + scope.String()
}

// Run delivers the effects of scope while h holds its lock: it takes the
// dispatcher's resource over with h's token, then reads pending effects,
// sends them and marks them, round after round, waking when the log tells
// it of a new effect ([Watcher]) or every [WithPollInterval].
//
// It returns when ctx ends (ctx's error), when h's lock is lost or its
// validity deadline passes (an error matching [fence.ErrLockLost]), when a
// newer dispatcher has taken over (an error matching [fence.ErrStale]),
// or at start when the store refuses what a dispatcher needs (matching
// [ErrNotPermitted]). Failures to read or mark the log (the takeover and
// Check included) are ridden out
// with backoff: what was sent but not marked is sent again. Run fails
// with an error matching [fence.ErrInvalidArgument] for a nil ctx or h,
// h's invalid token, or an invalid scope.
func (d *Dispatcher) Run(ctx context.Context, h fence.Holder, scope Scope) error {
	if ctx == nil {
		return fmt.Errorf("%w: outbox: Run: nil context", fence.ErrInvalidArgument)
	}
	g, err := fence.NewGuard(h)
	if err != nil {
		return fmt.Errorf("outbox: Run: %w", err)
	}
	if err := scope.Validate(); err != nil {
		return err
	}
	scope = scope.norm()
	ctx, cancel := context.WithCancel(ctx)
	lost := make(chan struct{})
	go func() { // ends sends under way when the lock is lost
		defer close(lost)
		select {
		case <-h.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-lost }()
	r := &run{d: d, g: g, scope: scope, by: fence.Claim{Resource: d.Resource(scope), Token: g.Token()}, retry: map[string]*retry{}}
	return r.explain(ctx, r.start(ctx))
}

// start takes over, riding out the store's transient failures (a lost
// reply, an unreachable server) with backoff, and runs the rounds. A
// refusal (the grants, a newer dispatcher, bad input) or the lock's loss
// ends it.
func (r *run) start(ctx context.Context) error {
	backoff := r.d.o.minBackoff
	for {
		err := r.takeOver(ctx)
		switch {
		case err == nil:
			return r.loop(ctx)
		case errors.Is(err, ErrNotPermitted), errors.Is(err, fence.ErrStale), errors.Is(err, fence.ErrLockLost),
			errors.Is(err, fence.ErrInvalidArgument), ctx.Err() != nil:
			return err
		}
		r.report(Effect{}, err)
		wait(ctx, jitter(backoff))
		backoff = min(2*backoff, r.d.o.maxBackoff)
	}
}

// takeOver checks the store's grants and raises the dispatcher's fence.
func (r *run) takeOver(ctx context.Context) error {
	if c, ok := r.d.log.(Checker); ok {
		if err := c.Check(ctx, r.scope); err != nil {
			return err
		}
	}
	if err := r.settle(ctx, nil); err != nil {
		return fmt.Errorf("outbox: taking over %s: %w", r.by.Resource, err)
	}
	return nil
}

// explain turns the end of ctx, when the lock's loss ended it, into the
// loss.
func (r *run) explain(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, fence.ErrLockLost) || errors.Is(err, fence.ErrStale) {
		return err
	}
	if ctx.Err() != nil {
		if lerr := r.g.Check(); lerr != nil {
			return lerr
		}
	}
	return err
}

// wait returns after d, or when ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
