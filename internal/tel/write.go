package tel

import (
	"context"
	"errors"
	"fmt"
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

// outcomes are indexed by [outcome].
var outcomes = [...]string{iAccepted: Accepted, iStale: Stale, iLockLost: LockLost, iUnknown: Unknown, iError: Error}

// WritesMetric is the name of the counter of fenced writes, whose data
// points carry [AttrAdapter] and [AttrOutcome] (one of the outcomes above).
const WritesMetric = "fencelock.writes"

// Attribute keys; the exported ones for readers of the metrics (the
// harness).
const (
	AttrAdapter   = attribute.Key("fencelock.adapter")
	AttrOutcome   = attribute.Key("fencelock.outcome")
	attrAdapter   = AttrAdapter
	attrOperation = attribute.Key("fencelock.operation")
	attrOutcome   = AttrOutcome
	attrResource  = attribute.Key("fencelock.resource")
	attrToken     = attribute.Key("fencelock.token")
)

// Outcome classifies a fenced write's result.
func Outcome(err error) string { return outcomes[outcome(err)] }

// The indices of outcomes.
const (
	iAccepted = iota
	iStale
	iLockLost
	iUnknown
	iError
)

func outcome(err error) int {
	switch {
	case err == nil:
		return iAccepted
	case errors.Is(err, fence.ErrStale):
		return iStale
	case errors.Is(err, fence.ErrLockLost):
		return iLockLost
	case errors.Is(err, fence.ErrUnknownOutcome):
		return iUnknown
	}
	return iError
}

// Recorder is one adapter's instruments. Safe for concurrent use.
type Recorder struct {
	meter  metric.Meter
	tracer *Tracer
	writes metric.Int64Counter
	dur    metric.Float64Histogram
	ops    map[string]*Op
}

// Op is one operation of an adapter ("update", "put"), with everything its
// writes report with built in advance. Safe for concurrent use.
type Op struct {
	r       *Recorder
	span    string // adapter.op
	adapter string // the adapter attribute's value, for spans
	add     [len(outcomes)][]metric.AddOption
	record  [len(outcomes)][]metric.RecordOption
	outcome [len(outcomes)]attribute.KeyValue
}

// SecondsBuckets are the bucket boundaries of every fencelock histogram
// in seconds: from half a millisecond (a fenced write, a keepalive on a
// LAN) to fifteen minutes (a long wait or hold). OpenTelemetry's default
// boundaries (0, 5, 10, 25, ... 10000) are made for milliseconds: in
// seconds they put every keepalive and most waits in one bucket.
var SecondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}

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
	r := &Recorder{meter: mp.Meter(scope), tracer: NewTracer(tp, scope, trace.WithSpanKind(trace.SpanKindClient)), ops: map[string]*Op{}}
	var err1, err2 error
	r.writes, err1 = r.meter.Int64Counter(WritesMetric, metric.WithUnit("{write}"),
		metric.WithDescription("Fenced writes, by adapter, operation and outcome (accepted, stale, lock_lost, unknown, error)."))
	r.dur, err2 = r.meter.Float64Histogram("fencelock.write.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of fenced writes, by adapter, operation and outcome."),
		metric.WithExplicitBucketBoundaries(SecondsBuckets...))
	for _, op := range ops {
		r.ops[op] = r.newOp(adapter, op)
	}
	return r, errors.Join(err1, err2)
}

func (r *Recorder) newOp(adapter, op string) *Op {
	o := &Op{r: r, span: adapter + "." + op, adapter: adapter}
	for i, oc := range outcomes {
		set := attribute.NewSet(attrAdapter.String(adapter), attrOperation.String(op), attrOutcome.String(oc))
		o.add[i] = []metric.AddOption{metric.WithAttributeSet(set)}
		o.record[i] = []metric.RecordOption{metric.WithAttributeSet(set)}
		o.outcome[i] = attrOutcome.String(oc)
	}
	return o
}

// Op returns the operation called name, one of those given to [New]. It
// panics on any other name: the adapters name their operations in
// constants.
func (r *Recorder) Op(name string) *Op {
	o, ok := r.ops[name]
	if !ok {
		panic(fmt.Sprintf("tel: operation %q was not declared", name))
	}
	return o
}

// Counter returns an adapter-specific counter.
func (r *Recorder) Counter(name, unit, desc string) (metric.Int64Counter, error) {
	return r.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
}

// Write is one write under way, from [Op.Start] to [Write.End].
type Write struct {
	op        *Op
	ctx       context.Context
	span      trace.Span
	recording bool      // span records attributes (asked once: an SDK span locks to answer)
	start     time.Time // zero when no SDK records the duration
}

// Start starts the span of one write under token and returns the context
// the write runs in (the span's).
func (o *Op) Start(ctx context.Context, token fence.Token) (context.Context, Write) {
	ctx, span := o.r.tracer.Start(ctx, o.span)
	w := Write{op: o, ctx: ctx, span: span, recording: span.IsRecording()}
	if o.r.dur.Enabled(ctx) {
		w.start = time.Now()
	}
	if w.recording { // no attributes are built for a span no one records
		span.SetAttributes(attrAdapter.String(o.adapter), attrToken.Int64(int64(token)))
	}
	return ctx, w
}

// Recording reports whether the write's span records attributes: callers
// build the costlier ones ([Write.SetResource]) only then.
func (w Write) Recording() bool { return w.recording }

// SetResource names the resource written on the span.
func (w Write) SetResource(resource string) { w.span.SetAttributes(attrResource.String(resource)) }

// End counts the write with the outcome of err and ends its span.
func (w Write) End(err error) {
	i := outcome(err)
	w.op.r.writes.Add(w.ctx, 1, w.op.add[i]...)
	if !w.start.IsZero() {
		w.op.r.dur.Record(w.ctx, time.Since(w.start).Seconds(), w.op.record[i]...)
	}
	if w.recording {
		w.span.SetAttributes(w.op.outcome[i])
		if err != nil {
			w.span.RecordError(err)
			if i == iUnknown || i == iError { // stale and lock_lost are the fence working
				w.span.SetStatus(codes.Error, err.Error())
			}
		}
	}
	w.span.End()
}

// SQL is the instruments of an adapter that fences SQL rows
// (fence/postgres, fence/sql): its six operations, and a counter of the
// rollbacks the server asked to retry, named fencelock.ADAPTER.retryable_errors
// and described by retryDesc.
type SQL struct {
	Update, Upsert, Tx, Put, Delete, Exec *Op
	Retryable                             metric.Int64Counter
}

// NewSQL builds a SQL adapter's instruments on mp and tp (nil: the global
// providers). On an error it still returns instruments, those the
// providers gave.
func NewSQL(adapter, scope string, mp metric.MeterProvider, tp trace.TracerProvider, retryDesc string) (*SQL, error) {
	r, err := New(adapter, scope, mp, tp, "update", "upsert", "tx", "put", "delete", "exec")
	retryable, rerr := r.Counter("fencelock."+adapter+".retryable_errors", "{error}", retryDesc)
	return &SQL{Update: r.Op("update"), Upsert: r.Op("upsert"), Tx: r.Op("tx"), Put: r.Op("put"),
		Delete: r.Op("delete"), Exec: r.Op("exec"), Retryable: retryable}, errors.Join(err, rerr)
}

// UpdateSpan returns w as the span of fence's update loop
// ([fence.UpdateTracer]), which ends it once with the update's result.
// While nothing would record it (no SDK: no span, no duration, no count),
// it ends w's no-op span now and returns a shared no-op, so that an
// uninstrumented update allocates nothing.
func (w Write) UpdateSpan() fence.UpdateSpan {
	if !w.recording && w.start.IsZero() && !w.op.r.writes.Enabled(w.ctx) {
		w.span.End()
		return noUpdateSpan{}
	}
	return &w
}

// StartUpdate starts the span of an Update of key with token, as
// [fence.UpdateTracer] has it: what every adapter's rounds return.
func (o *Op) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	ctx, w := o.Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	return ctx, w.UpdateSpan()
}

// StartUpdateAll starts the span of an UpdateAll of set, as
// [fence.UpdateAllTracer] has it: its token is the first claim's, its
// resource the claims' label.
func (o *Op) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	ctx, w := o.Start(ctx, set[0].Token)
	if w.Recording() {
		w.SetResource(fence.ClaimsLabel(set))
	}
	return ctx, w.UpdateSpan()
}

// noUpdateSpan is the span of an update that nothing records.
type noUpdateSpan struct{}

func (noUpdateSpan) End(error) {}
