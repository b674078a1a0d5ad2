package redisfence

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures a [Store] or a [Hash]. Options are created by the
// With… functions of this package; the interface is sealed. An option only
// records its value: [New] and [NewHash] check them all and fail, with an
// error matching [ErrInvalidOption], on the first invalid one.
type Option interface {
	apply(*options)
}

type options struct {
	meters      metric.MeterProvider // nil: the global one
	tracers     trace.TracerProvider // nil: the global one
	nilProvider bool                 // a provider option was given nil
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the writes: fencelock.writes and fencelock.write.duration (attributes
// fencelock.adapter "redis", fencelock.operation put, delete,
// get_for_update, update or update_all for a Store, hash_set, hash_get_for_update or
// hash_update for a Hash, and fencelock.outcome accepted, stale, unknown
// or error). A GetForUpdate counts as a write, since it claims the key:
// one that finds no value is accepted. A call refused for its arguments,
// before any I/O, is not counted. Default: the global provider
// (otel.GetMeterProvider), which records nothing until the application
// installs an SDK. nil (a typed nil too) makes New fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span
// of each write (redis.put, redis.hash_set, …: children of the caller's
// context, with the token and the key). Default: the global provider. nil
// (a typed nil too) makes New fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

// buildOptions applies and checks opts.
func buildOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	if o.nilProvider {
		return o, fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	}
	return o, nil
}
