package dynamofence

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures a [Store] or a [Table]. Options are created by the
// With… functions of this package; the interface is sealed. An option only
// records its value: [New] and [NewTable] check them all and fail, with an
// error matching [ErrInvalidOption], on the first invalid one.
type Option interface {
	apply(*options)
}

type options struct {
	keyAttr     string
	meters      metric.MeterProvider // nil: the global one
	tracers     trace.TracerProvider // nil: the global one
	nilProvider bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// DefaultKeyAttribute is the name of a [Store]'s table's partition key
// attribute (a string), unless [WithKeyAttribute] names another.
const DefaultKeyAttribute = "key"

// WithKeyAttribute names the partition key attribute (of type S) of a
// [Store]'s table; the table has no sort key. Default
// [DefaultKeyAttribute]. A [Table] ignores it: its items' keys are given
// whole to each call.
func WithKeyAttribute(name string) Option {
	return optionFunc(func(o *options) { o.keyAttr = name })
}

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the writes: fencelock.writes and fencelock.write.duration (attributes
// fencelock.adapter "dynamodb", fencelock.operation put, delete,
// get_for_update, update or update_all for a Store, table_update,
// table_get_for_update or transact for a Table, and fencelock.outcome). A
// GetForUpdate counts as a write, since it claims the item. A call refused
// for its arguments, before any I/O, is not counted. Default: the global
// provider. nil (a typed nil too) makes New fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span
// of each write (dynamodb.put, dynamodb.transact, …: children of the
// caller's context, with the token and the key). Default: the global
// provider. nil (a typed nil too) makes New fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

func buildOptions(opts []Option) (options, error) {
	o := options{keyAttr: DefaultKeyAttribute}
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	if o.nilProvider {
		return o, fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	}
	switch o.keyAttr {
	case "":
		return o, fmt.Errorf("%w: WithKeyAttribute: empty name", ErrInvalidOption)
	case attrFloor, attrToken, attrValue, attrVersion, attrWrite, attrOutboxPos:
		return o, fmt.Errorf("%w: WithKeyAttribute(%q): the name of an attribute the Store writes", ErrInvalidOption, o.keyAttr)
	}
	return o, nil
}
