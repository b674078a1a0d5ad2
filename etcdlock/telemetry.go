package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/internal/writetel"
)

// instrumentationName names the package's meter and tracer.
const instrumentationName = "github.com/fencelock/fencelock/etcdlock"

// Attribute keys. Their values come from small fixed sets, except the lock
// name, recorded only with WithNameAttribute.
const (
	attrKind    = attribute.Key("fencelock.kind")    // "lock" or "election"
	attrOutcome = attribute.Key("fencelock.outcome") // of an acquisition
	attrCause   = attribute.Key("fencelock.cause")   // of a loss
	attrName    = attribute.Key("fencelock.name")
	attrToken   = attribute.Key("fencelock.token") // spans only
	attrLease   = attribute.Key("fencelock.lease") // spans only
)

// Outcomes of an acquisition, and causes of a loss.
const (
	outcomeAcquired  = "acquired"
	outcomeLocked    = "locked"
	outcomeTimeout   = "timeout"
	outcomeCancelled = "cancelled"
	outcomeError     = "error"

	causeLeaseExpired    = "lease_expired"
	causeValidityExpired = "validity_expired"
	causeKeyDeleted      = "key_deleted"
	causeClientClosed    = "client_closed"
	causeOther           = "other"
)

// telemetry is a Client's metrics, tracer and logger. With no SDK installed
// (the default global providers) every call is a no-op, and the logger
// discards everything unless WithLogger gave one.
type telemetry struct {
	tracer trace.Tracer
	log    *slog.Logger
	names  bool
	sets   map[[2]string]metric.MeasurementOption // (kind, outcome or cause) -> attributes, without names

	waitDur        metric.Float64Histogram
	holdDur        metric.Float64Histogram
	acquisitions   metric.Int64Counter
	losses         metric.Int64Counter
	holders        metric.Int64UpDownCounter
	waiters        metric.Int64UpDownCounter
	releaseFails   metric.Int64Counter
	cleanupRetries metric.Int64Counter
	keepaliveDur   metric.Float64Histogram
	validityMargin metric.Float64Histogram
	sessionsEnded  metric.Int64Counter
	leaderChanges  metric.Int64Counter
	refused        *writetel.Op // writes a fence.Guard refused locally
}

func newTelemetry(o *options) (*telemetry, error) {
	m := o.meterProvider.Meter(instrumentationName)
	t := &telemetry{tracer: o.tracerProvider.Tracer(instrumentationName), log: o.logger, names: o.nameAttribute}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	hist := func(name, unit, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64UpDownCounter {
		g, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	t.waitDur = hist("fencelock.lock.wait.duration", "s", "Time from Lock, TryLock or Campaign to its outcome, by kind and outcome.")
	t.holdDur = hist("fencelock.lock.hold.duration", "s", "Time a lock was held or a term led, until released or lost.")
	t.acquisitions = count("fencelock.lock.acquisitions", "{acquisition}", "Locks acquired and terms won.")
	t.losses = count("fencelock.lock.losses", "{loss}", "Locks and terms lost, by cause.")
	t.holders = gauge("fencelock.lock.holders", "{lock}", "Locks held and terms led now.")
	t.waiters = gauge("fencelock.lock.waiters", "{waiter}", "Acquisitions waiting now.")
	t.releaseFails = count("fencelock.lock.release.failures", "{failure}", "Unlock and Resign requests that failed (retried in the background).")
	t.cleanupRetries = count("fencelock.lock.cleanup.retries", "{retry}", "Background retries of a release or of a failed acquisition's cleanup.")
	t.keepaliveDur = hist("fencelock.session.keepalive.duration", "s", "Round-trip time of acknowledged lease keepalives.")
	t.validityMargin = hist("fencelock.session.validity.margin", "s", "Validity deadline minus now, after each acknowledged keepalive.")
	t.sessionsEnded = count("fencelock.session.replacements", "{session}", "Sessions lost and replaced by a new lease.")
	t.leaderChanges = count("fencelock.election.leader.changes", "{change}", "New leaders seen by Observe.")
	guard, err := writetel.New("guard", instrumentationName, o.meterProvider, o.tracerProvider, "write")
	t.refused, errs = guard.Op("write"), append(errs, err)
	t.cacheSets()
	return t, errors.Join(errs...)
}

// kindOf is the kind attribute of an acquisition.
func kindOf(sp spot) string {
	if sp.ended == ErrResigned {
		return "election"
	}
	return "lock"
}

// attrs returns the metric attributes for kind and, if opted in, name,
// plus extra (an outcome or a cause). Without names they are built once.
func (t *telemetry) attrs(kind, name string, extra ...attribute.KeyValue) metric.MeasurementOption {
	if !t.names {
		key := [2]string{kind, ""}
		if len(extra) > 0 {
			key[1] = string(extra[0].Key) + "=" + extra[0].Value.AsString()
		}
		if o, ok := t.sets[key]; ok {
			return o
		}
	}
	kv := append([]attribute.KeyValue{attrKind.String(kind)}, extra...)
	if t.names {
		kv = append(kv, attrName.String(name))
	}
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// cacheSets builds the attribute sets used without names.
func (t *telemetry) cacheSets() {
	t.sets = map[[2]string]metric.MeasurementOption{}
	extras := []attribute.KeyValue{}
	for _, o := range []string{outcomeAcquired, outcomeLocked, outcomeTimeout, outcomeCancelled, outcomeError} {
		extras = append(extras, attrOutcome.String(o))
	}
	for _, c := range []string{causeLeaseExpired, causeValidityExpired, causeKeyDeleted, causeClientClosed, causeOther} {
		extras = append(extras, attrCause.String(c))
	}
	for _, kind := range []string{"lock", "election"} {
		t.sets[[2]string{kind, ""}] = metric.WithAttributeSet(attribute.NewSet(attrKind.String(kind)))
		for _, e := range extras {
			t.sets[[2]string{kind, string(e.Key) + "=" + e.Value.AsString()}] = metric.WithAttributeSet(attribute.NewSet(attrKind.String(kind), e))
		}
	}
}

// acquiring starts an acquisition's span and counts a waiter; done ends
// both with the outcome.
func (t *telemetry) acquiring(ctx context.Context, op string, sp spot) (context.Context, func(*Lock, error)) {
	kind := kindOf(sp)
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "etcdlock."+op, trace.WithSpanKind(trace.SpanKindClient))
	recording := span.IsRecording() // no attributes are built for a span no one records
	if recording {
		span.SetAttributes(attrKind.String(kind), attrName.String(sp.name))
	}
	base := t.attrs(kind, sp.name)
	t.waiters.Add(ctx, 1, base)
	return ctx, func(l *Lock, err error) {
		t.waiters.Add(ctx, -1, base)
		outcome := acquisitionOutcome(err)
		t.waitDur.Record(ctx, time.Since(start).Seconds(), t.attrs(kind, sp.name, attrOutcome.String(outcome)))
		debug := t.log.Enabled(ctx, slog.LevelDebug)
		if err != nil {
			if recording {
				if outcome == outcomeError {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
				}
				span.SetAttributes(attrOutcome.String(outcome))
			}
			span.End()
			if debug {
				t.log.DebugContext(ctx, "etcdlock: not acquired", "kind", kind, "name", sp.name, "outcome", outcome, "err", err)
			}
			return
		}
		t.acquisitions.Add(ctx, 1, base)
		t.holders.Add(ctx, 1, base)
		if recording {
			span.SetAttributes(attrOutcome.String(outcome), attrToken.Int64(int64(l.token)), attrLease.String(leaseHex(l.s.id)))
		}
		span.End()
		if debug {
			t.log.DebugContext(ctx, "etcdlock: acquired", "kind", kind, "name", sp.name, "token", int64(l.token),
				"lease", leaseHex(l.s.id), "waited", time.Since(start))
		}
	}
}

func acquisitionOutcome(err error) string {
	switch {
	case err == nil:
		return outcomeAcquired
	case errors.Is(err, ErrLocked):
		return outcomeLocked
	case errors.Is(err, context.DeadlineExceeded):
		return outcomeTimeout
	case errors.Is(err, context.Canceled):
		return outcomeCancelled
	}
	return outcomeError
}

// ended records the end of a held lock or term: released (cause is
// ErrUnlocked or ErrResigned) or lost.
func (t *telemetry) ended(l *Lock, cause error) {
	ctx := context.Background()
	kind := kindOf(l.t.spot)
	base := t.attrs(kind, l.t.name)
	t.holders.Add(ctx, -1, base)
	t.holdDur.Record(ctx, time.Since(l.acquired).Seconds(), base)
	if cause == l.t.ended {
		if t.log.Enabled(ctx, slog.LevelDebug) {
			t.log.Debug("etcdlock: released", "kind", kind, "name", l.t.name, "token", int64(l.token), "lease", leaseHex(l.s.id))
		}
		return
	}
	lossCause := causeOf(cause)
	t.losses.Add(ctx, 1, t.attrs(kind, l.t.name, attrCause.String(lossCause)))
	level := slog.LevelWarn
	if lossCause == causeClientClosed {
		level = slog.LevelDebug
	}
	if t.log.Enabled(ctx, level) {
		t.log.Log(ctx, level, "etcdlock: lost", "kind", kind, "name", l.t.name, "token", int64(l.token),
			"lease", leaseHex(l.s.id), "cause", lossCause, "owner", l.c.o.owner, "err", cause)
	}
}

func causeOf(err error) string {
	switch {
	case errors.Is(err, ErrClosed):
		return causeClientClosed
	case errors.Is(err, ErrLeaseExpired):
		return causeLeaseExpired
	case errors.Is(err, ErrValidityExpired):
		return causeValidityExpired
	case errors.Is(err, ErrKeyDeleted):
		return causeKeyDeleted
	}
	return causeOther
}

// releasing starts Unlock's or Resign's span; done ends it.
func (t *telemetry) releasing(ctx context.Context, l *Lock) (context.Context, func(error)) {
	op := "etcdlock.Unlock"
	if l.t.ended == ErrResigned {
		op = "etcdlock.Resign"
	}
	ctx, span := t.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() { // no attributes are built for a span no one records
		return ctx, func(error) { span.End() }
	}
	span.SetAttributes(attrName.String(l.t.name), attrToken.Int64(int64(l.token)), attrLease.String(leaseHex(l.s.id)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			if !errors.Is(err, ErrLost) && !errors.Is(err, ErrClosed) {
				span.SetStatus(codes.Error, err.Error())
			}
		}
		span.End()
	}
}

// releaseFailed counts an Unlock or Resign whose request failed.
func (t *telemetry) releaseFailed(l *Lock, err error) {
	t.releaseFails.Add(context.Background(), 1, t.attrs(kindOf(l.t.spot), l.t.name))
	t.log.Warn("etcdlock: release failed, retrying in the background", "name", l.t.name, "token", int64(l.token),
		"lease", leaseHex(l.s.id), "err", err)
}

// retried counts one background retry of a release or cleanup.
func (t *telemetry) retried() { t.cleanupRetries.Add(context.Background(), 1) }

// renewed records an acknowledged keepalive.
func (t *telemetry) renewed(rtt, margin time.Duration) {
	ctx := context.Background()
	t.keepaliveDur.Record(ctx, rtt.Seconds())
	t.validityMargin.Record(ctx, margin.Seconds())
}

// sessionEnded records a session lost and dropped for a new one.
func (t *telemetry) sessionEnded(s *session, cause error) {
	t.sessionsEnded.Add(context.Background(), 1)
	t.log.Warn("etcdlock: session lost; the next acquisition starts a new one", "lease", leaseHex(s.id), "cause", causeOf(cause), "err", cause)
}

// leaseHex formats a lease ID as etcdctl does.
func leaseHex(id clientv3.LeaseID) string { return fmt.Sprintf("%016x", int64(id)) }
