package azblobfence

import (
	"fmt"

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
	check       bool
	meters      metric.MeterProvider
	tracers     trace.TracerProvider
	nilProvider bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithPrefix puts the store's blobs under prefix in the container:
// resource key K is the blob prefix+K. Default: none.
func WithPrefix(prefix string) Option { return optionFunc(func(o *options) { o.prefix = prefix }) }

// WithConditionalCheck turns the check a Store makes before its first
// write ([Store.CheckConditionalWrites]) on or off. Default: on. Turn it
// off only for a server you have checked yourself: one that ignores
// If-Match lets a paused holder's late write land over a newer one.
func WithConditionalCheck(on bool) Option { return optionFunc(func(o *options) { o.check = on }) }

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the writes: fencelock.writes and fencelock.write.duration (attributes
// fencelock.adapter "azblob", fencelock.operation put, delete,
// get_for_update or update, and fencelock.outcome). Default: the global
// provider. nil (a typed nil too) makes New fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span
// of each write (azblob.put, azblob.update, …). Default: the global
// provider. nil (a typed nil too) makes New fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

func buildOptions(opts []Option) (options, error) {
	o := options{check: true}
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
