package etcdfence

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// DefaultMaxRequestBytes is etcd's default --max-request-bytes, 1.5 MiB,
// and the default of [WithMaxRequestBytes].
const DefaultMaxRequestBytes = 1536 * 1024

// Option configures a [Store]. Options are created by the With… functions
// of this package; the interface is sealed. An option only records its
// value: [New] checks them all and fails, with an error matching
// [ErrInvalidOption], on the first invalid one.
type Option interface {
	apply(*options)
}

type options struct {
	maxRequestBytes int
	meters          metric.MeterProvider // nil: the global one
	tracers         trace.TracerProvider // nil: the global one
	nilProvider     bool                 // a provider option was given nil
}

func defaultOptions() options { return options{maxRequestBytes: DefaultMaxRequestBytes} }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithMaxRequestBytes sets the size, in bytes, above which a write's etcd
// request is refused with [ErrValueTooLarge] before it is sent. Set it to
// the cluster's --max-request-bytes. The default is
// [DefaultMaxRequestBytes], etcd's own default; n must be positive. The
// request's size is estimated from above (the value, the key names as
// often as the request carries them, the tokens and a fixed allowance for
// the request's framing), so a value a little below the limit may be
// refused too. A limit set above the
// server's is harmless: etcd refuses the request, and the write returns
// ErrValueTooLarge all the same.
func WithMaxRequestBytes(n int) Option {
	return optionFunc(func(o *options) { o.maxRequestBytes = n })
}

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the Store's writes: fencelock.writes and fencelock.write.duration
// (attributes fencelock.adapter "etcd", fencelock.operation put, delete,
// get_for_update, update or update_all, fencelock.outcome accepted, stale, unknown or
// error). A GetForUpdate counts as a write, since it claims the key: one
// that finds no value is accepted. A call refused for its arguments,
// before any I/O, is not counted. Default: the global provider
// (otel.GetMeterProvider), which records nothing until the application
// installs an SDK. nil (a typed nil too) makes [New] fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span
// of each write (etcd.put, etcd.delete, etcd.get_for_update, etcd.update,
// etcd.update_all: children of the caller's context, with the token and
// the resource key; an UpdateAll's are its first token and its keys).
// Default: the global provider. nil (a typed nil too) makes [New] fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

// validate checks the recorded options, once, in [New].
func (o *options) validate() error {
	if o.nilProvider {
		return fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	}
	if o.maxRequestBytes <= 0 {
		return fmt.Errorf("%w: WithMaxRequestBytes(%d): must be positive", ErrInvalidOption, o.maxRequestBytes)
	}
	return nil
}
