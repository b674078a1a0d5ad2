package jsfence

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures a [Store]. Options are created by the With… functions
// of this package; the interface is sealed. [New] checks them all and
// fails, with an error matching [ErrInvalidOption], on the first invalid
// one.
type Option interface {
	apply(*options)
}

type options struct {
	prefix      string
	timeout     time.Duration
	noCache     bool
	meters      metric.MeterProvider
	tracers     trace.TracerProvider
	nilProvider bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// DefaultRequestTimeout is how long a Store waits for the answer to one
// request by default ([WithRequestTimeout]): JetStream's own default.
const DefaultRequestTimeout = 5 * time.Second

// WithPrefix puts the store's entries under prefix in the bucket: resource
// key K is the bucket's key prefix+K. Default: none.
func WithPrefix(prefix string) Option { return optionFunc(func(o *options) { o.prefix = prefix }) }

// WithoutRevisionCache has every Put and Delete read the key before it
// writes (two requests), instead of writing at once on the revision the
// Store last wrote or read (one request, and a read only when that
// revision is gone). The cache is safe while the bucket lives, since a
// stream's sequence numbers never repeat; a bucket deleted and created
// again starts them over, so a cached revision may then name another
// writer's entry, and a stale write land on it. Use it where buckets are
// recreated under running Stores. Default: the cache is on.
func WithoutRevisionCache() Option { return optionFunc(func(o *options) { o.noCache = true }) }

// WithRequestTimeout bounds the wait for the answer to each request (a
// read, a write) within the call's context. A write whose answer does not
// come in d is followed by a read, which tells whether it landed: so the
// caller's context should leave room for more than one request. Default:
// [DefaultRequestTimeout]. d must be positive.
func WithRequestTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.timeout = d })
}

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the writes: fencelock.writes and fencelock.write.duration (attributes
// fencelock.adapter "jetstream", fencelock.operation put, delete,
// get_for_update or update, and fencelock.outcome). Default: the global
// provider. nil (a typed nil too) makes New fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span
// of each write (jetstream.put, jetstream.update, …). Default: the global
// provider. nil (a typed nil too) makes New fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

func buildOptions(opts []Option) (options, error) {
	o := options{timeout: DefaultRequestTimeout}
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	switch {
	case o.nilProvider:
		return o, fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	case o.timeout <= 0:
		return o, fmt.Errorf("%w: request timeout %v, want > 0", ErrInvalidOption, o.timeout)
	}
	return o, nil
}
