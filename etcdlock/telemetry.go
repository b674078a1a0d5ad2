package etcdlock

import (
	"context"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/tel"
)

// instrumentationName names the package's meter and tracer.
const instrumentationName = "github.com/fencelock/fencelock/etcdlock"

// Attribute keys. Their values come from small fixed sets, except the lock
// name, recorded only with WithNameAttribute.
const (
	attrKind    = attribute.Key("fencelock.kind")    // a kind's name in kindTable
	attrOutcome = attribute.Key("fencelock.outcome") // of an acquisition
	attrCause   = attribute.Key("fencelock.cause")   // of a loss
	attrName    = attribute.Key("fencelock.name")
	attrToken   = attribute.Key("fencelock.token") // spans only
	attrLease   = attribute.Key("fencelock.lease") // spans only
)

// outcome is how an acquisition ended.
type outcome uint8

const (
	outcomeAcquired outcome = iota
	outcomeLocked
	outcomeTimeout
	outcomeCancelled
	outcomeError
)

var outcomes = [...]string{outcomeAcquired: "acquired", outcomeLocked: "locked", outcomeTimeout: "timeout",
	outcomeCancelled: "cancelled", outcomeError: "error"}

// cause is why a held lock or term was lost.
type cause uint8

const (
	causeLeaseExpired cause = iota
	causeValidityExpired
	causeKeyDeleted
	causeClientClosed
	causeOther
)

var causes = [...]string{causeLeaseExpired: "lease_expired", causeValidityExpired: "validity_expired",
	causeKeyDeleted: "key_deleted", causeClientClosed: "client_closed", causeOther: "other"}

// attrs is one attribute set as the options of the measurements that
// carry it, built once: passing them as a prebuilt slice allocates nothing
// per measurement.
type attrs struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newAttrs(kv ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return attrs{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

// telemetry is a Client's metrics, tracer and logger. With no SDK installed
// (the default global providers) every call is a no-op that allocates
// nothing of its own, and the logger discards everything unless WithLogger
// gave one. Everything a measurement or a span starts with is built once,
// here; without names (WithNameAttribute) so is every attribute set.
type telemetry struct {
	tracer *tel.Tracer // starts no span while no SDK is set
	log    *slog.Logger
	names  bool

	// Attribute sets without names, by kind and by kind and outcome or
	// cause; the span attributes of each kind and outcome.
	base        [numKinds]attrs
	byOutcome   [numKinds][len(outcomes)]attrs
	byCause     [numKinds][len(causes)]attrs
	spanKind    [numKinds]attribute.KeyValue
	spanOutcome [len(outcomes)]attribute.KeyValue

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
	groupOwned     metric.Int64UpDownCounter
	groupHandoffs  metric.Int64Counter
	noAttrs        attrs
	refused        *tel.Op // writes a fence.Guard refused locally
}

func newTelemetry(o *options) (*telemetry, error) {
	t := &telemetry{tracer: tel.NewTracer(o.tracerProvider, instrumentationName, trace.WithSpanKind(trace.SpanKindClient)),
		log: o.logger, names: o.nameAttribute}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	err := t.instruments(o.meterProvider.Meter(instrumentationName))
	guard, gerr := tel.New("guard", instrumentationName, o.meterProvider, o.tracerProvider, "write")
	t.refused = guard.Op("write")
	t.cacheSets()
	return t, errors.Join(err, gerr)
}

// instruments creates the metrics on m.
func (tl *telemetry) instruments(m metric.Meter) error {
	var errs []error
	hist := func(name, unit, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(tel.SecondsBuckets...))
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
	tl.waitDur = hist("fencelock.lock.wait.duration", "s", "Time from an acquisition's call (Lock, RLock, Acquire, Campaign, or a Try form) to its outcome, by kind and outcome.")
	tl.holdDur = hist("fencelock.lock.hold.duration", "s", "Time a lock was held or a term led, until released or lost.")
	tl.acquisitions = count("fencelock.lock.acquisitions", "{acquisition}", "Locks acquired and terms won.")
	tl.losses = count("fencelock.lock.losses", "{loss}", "Locks and terms lost, by cause.")
	tl.holders = gauge("fencelock.lock.holders", "{lock}", "Locks held and terms led now.")
	tl.waiters = gauge("fencelock.lock.waiters", "{waiter}", "Acquisitions waiting now.")
	tl.releaseFails = count("fencelock.lock.release.failures", "{failure}", "Unlock and Resign requests that failed (retried in the background).")
	tl.cleanupRetries = count("fencelock.lock.cleanup.retries", "{retry}", "Background retries of a release or of a failed acquisition's cleanup.")
	tl.keepaliveDur = hist("fencelock.session.keepalive.duration", "s", "Round-trip time of acknowledged lease keepalives.")
	tl.validityMargin = hist("fencelock.session.validity.margin", "s", "Validity deadline minus now, after each acknowledged keepalive.")
	tl.sessionsEnded = count("fencelock.session.replacements", "{session}", "Sessions lost and replaced by a new lease.")
	tl.leaderChanges = count("fencelock.election.leader.changes", "{change}", "New leaders seen by Observe.")
	tl.groupOwned = gauge("fencelock.group.partitions", "{partition}", "Partitions of groups this worker owns now (Group.Join).")
	tl.groupHandoffs = count("fencelock.group.handoffs", "{handoff}", "Partitions this worker released because a rebalance moved them, or because it left the group.")
	return errors.Join(errs...)
}

// cacheSets builds the attribute sets used without names, and the span
// attributes of each kind and outcome.
func (tl *telemetry) cacheSets() {
	tl.noAttrs = newAttrs()
	for o, s := range outcomes {
		tl.spanOutcome[o] = attrOutcome.String(s)
	}
	for k, row := range kindTable {
		tl.spanKind[k] = attrKind.String(row.name)
		tl.base[k] = newAttrs(tl.spanKind[k])
		for o := range outcomes {
			tl.byOutcome[k][o] = newAttrs(tl.spanKind[k], tl.spanOutcome[o])
		}
		for c, cs := range causes {
			tl.byCause[k][c] = newAttrs(tl.spanKind[k], attrCause.String(cs))
		}
	}
}

// attrsOf returns the attribute set of kind k: the one built in advance,
// or, with names, one built now with the name.
func (tl *telemetry) attrsOf(k kind, name string) attrs {
	if !tl.names {
		return tl.base[k]
	}
	return newAttrs(tl.spanKind[k], attrName.String(name))
}

// groupAttrs is the attribute set of a group's metrics: none, or with
// names the group's.
func (tl *telemetry) groupAttrs(name string) attrs {
	if !tl.names {
		return tl.noAttrs
	}
	return newAttrs(attrName.String(name))
}

// attrsOutcome is attrsOf with an acquisition's outcome.
func (tl *telemetry) attrsOutcome(k kind, name string, o outcome) attrs {
	if !tl.names {
		return tl.byOutcome[k][o]
	}
	return newAttrs(tl.spanKind[k], tl.spanOutcome[o], attrName.String(name))
}

// attrsCause is attrsOf with a loss's cause.
func (tl *telemetry) attrsCause(k kind, name string, c cause) attrs {
	if !tl.names {
		return tl.byCause[k][c]
	}
	return newAttrs(tl.spanKind[k], attrCause.String(causes[c]), attrName.String(name))
}

func acquisitionOutcome(err error) outcome {
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

func causeOf(err error) cause {
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
