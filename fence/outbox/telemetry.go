package outbox

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/tel"
)

const scope = "github.com/fencelock/fencelock/fence/outbox"

// Outcomes of one delivery attempt, the fencelock.outcome attribute of
// fencelock.outbox.effects.
const (
	outDelivered = "delivered"
	outRetry     = "retry"
	outParked    = "parked"
)

var (
	attrKey      = attribute.Key("fencelock.outbox.key")
	attrResource = attribute.Key("fencelock.resource")
	attrToken    = attribute.Key("fencelock.token")
	attrDest     = attribute.Key("fencelock.outbox.destination")
)

// telemetry is a dispatcher's instruments.
type telemetry struct {
	tracer  *tel.Tracer
	effects metric.Int64Counter
	dur     metric.Float64Histogram
	outs    map[string]metric.MeasurementOption
}

func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(scope)
	t := &telemetry{tracer: tel.NewTracer(tp, scope, trace.WithSpanKind(trace.SpanKindProducer)), outs: map[string]metric.MeasurementOption{}}
	var err1, err2 error
	t.effects, err1 = m.Int64Counter("fencelock.outbox.effects", metric.WithUnit("{effect}"),
		metric.WithDescription("Delivery attempts of outbox effects, by outcome (delivered, retry, parked)."))
	t.dur, err2 = m.Float64Histogram("fencelock.outbox.send.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of outbox delivery attempts, by outcome."),
		metric.WithExplicitBucketBoundaries(tel.SecondsBuckets...))
	for _, o := range []string{outDelivered, outRetry, outParked} {
		t.outs[o] = metric.WithAttributeSet(attribute.NewSet(tel.AttrOutcome.String(o)))
	}
	return t, errors.Join(err1, err2)
}

func (t *telemetry) startSend(ctx context.Context, e Effect) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, "outbox.send")
	if span.IsRecording() {
		span.SetAttributes(attrKey.String(e.Key()), attrResource.String(e.Resource), attrToken.Int64(int64(e.Token)), attrDest.String(e.Destination))
	}
	return ctx, span
}

func (t *telemetry) endSend(ctx context.Context, span trace.Span, outcome string, start time.Time, err error) {
	t.effects.Add(ctx, 1, t.outs[outcome])
	t.dur.Record(ctx, time.Since(start).Seconds(), t.outs[outcome])
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, outcome)
	}
	span.SetAttributes(tel.AttrOutcome.String(outcome))
	span.End()
}
