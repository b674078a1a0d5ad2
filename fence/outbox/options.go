package outbox

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/fence"
)

// Option configures [NewDispatcher].
type Option interface{ apply(*options) }

type options struct {
	name        string
	batch       int
	concurrency int
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	sendTimeout time.Duration
	poll        time.Duration
	onError     func(e Effect, err error)
	mp          metric.MeterProvider
	tp          trace.TracerProvider
}

func defaultOptions() options {
	return options{
		name: "default", batch: 256, concurrency: 16, maxAttempts: 20,
		minBackoff: 100 * time.Millisecond, maxBackoff: 30 * time.Second,
		sendTimeout: 10 * time.Second, poll: time.Second,
	}
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithName names the dispatcher's fence: the dispatcher settles on the
// resource "fencelock-outbox/NAME/INDEX/PARTITIONS" ([Dispatcher.Resource])
// with its holder's token, so that of two dispatchers of one name and
// scope the older one marks nothing once the newer one has started.
// Default "default". Dispatchers of different outboxes in one store need
// different names.
func WithName(name string) Option { return optionFunc(func(o *options) { o.name = name }) }

// WithBatch sets how many pending effects one round reads, delivers and
// settles (in one Settle). Default 256.
func WithBatch(n int) Option { return optionFunc(func(o *options) { o.batch = n }) }

// WithConcurrency sets how many resources' effects are sent at once; each
// resource's effects are always sent one after another, in order. Default
// 16.
func WithConcurrency(n int) Option { return optionFunc(func(o *options) { o.concurrency = n }) }

// WithMaxAttempts sets after how many failed deliveries an effect is
// parked. Default 20: with the default backoff, about 6 minutes of
// retries, well past a receiver's in-flight window ([WithPendingTimeout],
// 30 s), so that a receiver that crashed while applying the effect has
// freed its key before the dispatcher gives up. Errors marked [Permanent]
// park it at the first.
func WithMaxAttempts(n int) Option { return optionFunc(func(o *options) { o.maxAttempts = n }) }

// WithBackoff sets the wait before the first retry of an effect, doubled
// (with jitter) on each further failure up to max. Default 100 ms and 30 s.
// While a resource's effect waits, the resource's later effects wait
// behind it; other resources go on.
func WithBackoff(first, max time.Duration) Option {
	return optionFunc(func(o *options) { o.minBackoff, o.maxBackoff = first, max })
}

// WithSendTimeout bounds each delivery attempt. Default 10 s.
func WithSendTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.sendTimeout = d })
}

// WithPollInterval sets how often the dispatcher reads its log when
// nothing woke it: the only way it learns of new effects on a log that is
// not a [Watcher], and a safety net on one that is. Default 1 s.
func WithPollInterval(d time.Duration) Option { return optionFunc(func(o *options) { o.poll = d }) }

// WithErrorHandler sets a function called with each failed delivery
// attempt (the error matches [ErrParked] when the effect was parked) and,
// with the zero Effect, each failure to read or settle the log that the
// dispatcher rides out. It is called from the dispatcher's goroutines and
// must return promptly. Default none.
func WithErrorHandler(f func(e Effect, err error)) Option {
	return optionFunc(func(o *options) { o.onError = f })
}

// WithMeterProvider sets where the dispatcher's metrics go
// (fencelock.outbox.effects, fencelock.outbox.send.duration). Default the
// global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.mp = mp })
}

// WithTracerProvider sets where the dispatcher's spans go (outbox.round,
// outbox.send). Default the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tp = tp })
}

func (o *options) check() error {
	switch {
	case o.name == "":
		return fmt.Errorf("%w: outbox: WithName: empty name", fence.ErrInvalidArgument)
	case o.batch < 1:
		return fmt.Errorf("%w: outbox: WithBatch(%d): want at least 1", fence.ErrInvalidArgument, o.batch)
	case o.concurrency < 1:
		return fmt.Errorf("%w: outbox: WithConcurrency(%d): want at least 1", fence.ErrInvalidArgument, o.concurrency)
	case o.maxAttempts < 1:
		return fmt.Errorf("%w: outbox: WithMaxAttempts(%d): want at least 1", fence.ErrInvalidArgument, o.maxAttempts)
	case o.minBackoff <= 0 || o.maxBackoff < o.minBackoff:
		return fmt.Errorf("%w: outbox: WithBackoff(%v, %v): want 0 < first <= max", fence.ErrInvalidArgument, o.minBackoff, o.maxBackoff)
	case o.sendTimeout <= 0:
		return fmt.Errorf("%w: outbox: WithSendTimeout(%v): want > 0", fence.ErrInvalidArgument, o.sendTimeout)
	case o.poll <= 0:
		return fmt.Errorf("%w: outbox: WithPollInterval(%v): want > 0", fence.ErrInvalidArgument, o.poll)
	}
	return nil
}
