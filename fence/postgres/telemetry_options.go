package postgres

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option sets where the writes of a [Table], a [Fences] or a [Store] report
// their telemetry. Create one with [WithMeterProvider] or
// [WithTracerProvider]; the interface is sealed. Every Option is also a
// [TableOption]. An option only records its value: [NewTable], [NewFences]
// and [NewStore] check them and fail, with an error matching
// [ErrInvalidOption], on a nil Option or a nil provider.
type Option interface {
	TableOption
	StoreOption
	apply(*telemetryOptions)
}

// telemetryOptions are the providers a value's writes report to.
type telemetryOptions struct {
	meters      metric.MeterProvider // nil: the global one
	tracers     trace.TracerProvider // nil: the global one
	nilProvider bool                 // a provider option was given nil
}

type telemetryOptionFunc func(*telemetryOptions)

func (f telemetryOptionFunc) apply(o *telemetryOptions)  { f(o) }
func (f telemetryOptionFunc) applyTable(o *tableOptions) { f(&o.tel) }
func (f telemetryOptionFunc) applyStore(o *storeOptions) { o.table = append(o.table, f) }

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the writes of a [Table], [Fences] or [Store]: fencelock.writes and
// fencelock.write.duration (attributes fencelock.adapter "postgres",
// fencelock.operation update, upsert, tx, exec, put or delete,
// fencelock.outcome accepted, stale, unknown or error) and
// fencelock.postgres.retryable_errors. A write refused for its arguments,
// before any I/O, is not counted. Default: the global provider
// (otel.GetMeterProvider), which records nothing until the application
// installs an SDK. nil (a typed nil too) makes the constructor fail, and so
// does a provider that fails to create an instrument.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return telemetryOptionFunc(func(o *telemetryOptions) {
		o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp)
	})
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span of
// each fenced write of a [Table], [Fences] or [Store] (postgres.update,
// postgres.upsert, postgres.tx, postgres.exec, postgres.put,
// postgres.delete: children of the caller's context, with the token and
// the resource as attributes).
// Default: the global provider. nil (a typed nil too) makes the
// constructor fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return telemetryOptionFunc(func(o *telemetryOptions) {
		o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp)
	})
}

// newTelemetryOptions records opts and checks the result.
func newTelemetryOptions(opts []Option) (telemetryOptions, error) {
	var o telemetryOptions
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	return o, o.check()
}

func (o telemetryOptions) check() error {
	if o.nilProvider {
		return fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	}
	return nil
}

// telemetry returns the instruments on the chosen providers, or those on
// the global ones, shared, when none was chosen. An error is the
// providers' refusal to create one, wrapped.
func (o telemetryOptions) telemetry() (*pgTelemetry, error) {
	var t *pgTelemetry
	var err error
	if o.meters != nil || o.tracers != nil {
		t, err = newPGTelemetry(o.meters, o.tracers)
	} else {
		t, err = globalTelemetry()
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: creating the OpenTelemetry instruments: %w", err)
	}
	return t, nil
}
