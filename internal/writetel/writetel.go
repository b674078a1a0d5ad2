// Package writetel instruments fenced writes for the storage adapters
// (fence/postgres, fence/s3) through the OpenTelemetry API: a span per
// write, child of the caller's context, carrying the token; the writes by
// adapter, operation and outcome; and their duration.
package writetel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/fence"
)

// Outcomes of a fenced write.
const (
	Accepted = "accepted"
	Stale    = "stale"
	LockLost = "lock_lost"
	Unknown  = "unknown"
	Error    = "error"
)

var outcomes = []string{Accepted, Stale, LockLost, Unknown, Error}

// Outcome classifies a fenced write's result.
func Outcome(err error) string {
	switch {
	case err == nil:
		return Accepted
	case errors.Is(err, fence.ErrStale):
		return Stale
	case errors.Is(err, fence.ErrLockLost):
		return LockLost
	case errors.Is(err, fence.ErrUnknownOutcome):
		return Unknown
	}
	return Error
}

// Recorder is one adapter's instruments. Safe for concurrent use.
type Recorder struct {
	adapter string
	meter   metric.Meter
	tracer  trace.Tracer
	writes  metric.Int64Counter
	dur     metric.Float64Histogram
	sets    map[[2]string]metric.MeasurementOption // (op, outcome) -> attributes
}

// New returns the instruments of adapter ("postgres", "s3") for the
// operations ops, on mp and tp (nil: the global providers, which record
// nothing until the application installs an SDK).
func New(adapter, scope string, mp metric.MeterProvider, tp trace.TracerProvider, ops ...string) (*Recorder, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	r := &Recorder{adapter: adapter, meter: mp.Meter(scope), tracer: tp.Tracer(scope), sets: map[[2]string]metric.MeasurementOption{}}
	var err1, err2 error
	r.writes, err1 = r.meter.Int64Counter("fencelock.writes", metric.WithUnit("{write}"),
		metric.WithDescription("Fenced writes, by adapter, operation and outcome (accepted, stale, lock_lost, unknown, error)."))
	r.dur, err2 = r.meter.Float64Histogram("fencelock.write.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of fenced writes, by adapter, operation and outcome."))
	ad := attribute.String("fencelock.adapter", adapter)
	for _, op := range ops {
		for _, o := range outcomes {
			r.sets[[2]string{op, o}] = metric.WithAttributeSet(attribute.NewSet(ad,
				attribute.String("fencelock.operation", op), attribute.String("fencelock.outcome", o)))
		}
	}
	return r, errors.Join(err1, err2)
}

// Counter returns an adapter-specific counter.
func (r *Recorder) Counter(name, unit, desc string) (metric.Int64Counter, error) {
	return r.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
}

// Write starts the span of one fenced write op of resource under token;
// call end with its result.
func (r *Recorder) Write(ctx context.Context, op, resource string, token fence.Token) (context.Context, func(error)) {
	start := time.Now()
	ctx, span := r.tracer.Start(ctx, r.adapter+"."+op, trace.WithSpanKind(trace.SpanKindClient))
	recording := span.IsRecording() // no attributes are built for a span no one records
	if recording {
		span.SetAttributes(attribute.String("fencelock.adapter", r.adapter), attribute.String("fencelock.resource", resource),
			attribute.Int64("fencelock.token", int64(token)))
	}
	return ctx, func(err error) {
		o := Outcome(err)
		set, ok := r.sets[[2]string{op, o}]
		if !ok {
			set = metric.WithAttributes(attribute.String("fencelock.adapter", r.adapter),
				attribute.String("fencelock.operation", op), attribute.String("fencelock.outcome", o))
		}
		r.writes.Add(ctx, 1, set)
		r.dur.Record(ctx, time.Since(start).Seconds(), set)
		if recording {
			span.SetAttributes(attribute.String("fencelock.outcome", o))
			if err != nil {
				span.RecordError(err)
				if o == Error || o == Unknown {
					span.SetStatus(codes.Error, err.Error())
				}
			}
		}
		span.End()
	}
}
