package etcdlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/codes"
)

// What the calls of a Lock's life report: telemetry is the engine's
// observer (engine_observer.go). Each builds span attributes only for a span an
// SDK records, log arguments only for a level the logger takes, and reads
// the clock only for a duration an SDK records.

var _ engineObserver = (*telemetry)(nil)

// acquireSpan names the span of the call that makes an acquisition.
func acquireSpan(e acquireStartEvent) string {
	if !e.wait {
		return kindTable[e.kind].trySpan
	}
	return kindTable[e.kind].waitSpan
}

// acquireStart starts an acquisition's span and counts a waiter;
// acquireEnd ends both with the outcome.
func (tl *telemetry) acquireStart(ctx context.Context, e acquireStartEvent) (context.Context, observation) {
	ctx, span := tl.tracer.Start(ctx, acquireSpan(e))
	o := observation{span: span, timed: tl.waitDur.Enabled(ctx)}
	if o.timed || tl.log.Enabled(ctx, slog.LevelDebug) {
		o.start = time.Now()
	}
	if span.IsRecording() {
		span.SetAttributes(tl.spanKind[e.kind], attrName.String(e.name))
	}
	tl.waiters.Add(ctx, 1, tl.attrsOf(e.kind, e.name).add...)
	return ctx, o
}

// acquireEnd records the acquisition's outcome.
func (tl *telemetry) acquireEnd(ctx context.Context, o observation, e acquireEndEvent) {
	base := tl.attrsOf(e.kind, e.name) // built in advance, unless with names
	tl.waiters.Add(ctx, -1, base.add...)
	oc := acquisitionOutcome(e.err)
	if o.timed {
		tl.waitDur.Record(ctx, time.Since(o.start).Seconds(), tl.attrsOutcome(e.kind, e.name, oc).record...)
	}
	if e.err != nil {
		tl.notAcquired(ctx, o, oc, e)
		return
	}
	tl.acquisitions.Add(ctx, 1, base.add...)
	tl.holders.Add(ctx, 1, base.add...)
	if o.span.IsRecording() {
		o.span.SetAttributes(tl.spanOutcome[oc], attrToken.Int64(int64(e.token)), attrLease.String(leaseHex(e.lease)))
	}
	o.span.End()
	if tl.log.Enabled(ctx, slog.LevelDebug) {
		tl.log.DebugContext(ctx, "etcdlock: acquired", "kind", kindTable[e.kind].name, "name", e.name, "token", int64(e.token),
			"lease", leaseHex(e.lease), "waited", time.Since(o.start))
	}
}

func (tl *telemetry) notAcquired(ctx context.Context, o observation, oc outcome, e acquireEndEvent) {
	if o.span.IsRecording() {
		if oc == outcomeError {
			o.span.RecordError(e.err)
			o.span.SetStatus(codes.Error, e.err.Error())
		}
		o.span.SetAttributes(tl.spanOutcome[oc])
	}
	o.span.End()
	if tl.log.Enabled(ctx, slog.LevelDebug) {
		tl.log.DebugContext(ctx, "etcdlock: not acquired", "kind", kindTable[e.kind].name, "name", e.name, "outcome", outcomes[oc], "err", e.err)
	}
}

// holdStart is when a lock just acquired starts being held, for its hold
// duration: the zero time when no SDK records the duration, which spares
// reading the clock.
func (tl *telemetry) holdStart() time.Time {
	if tl.holdDur.Enabled(context.Background()) {
		return time.Now()
	}
	return time.Time{}
}

// releaseStart starts Unlock's or Resign's span.
func (tl *telemetry) releaseStart(ctx context.Context, e lockEvent) (context.Context, observation) {
	ctx, span := tl.tracer.Start(ctx, kindTable[e.kind].releaseSpan)
	if span.IsRecording() {
		span.SetAttributes(attrName.String(e.name), attrToken.Int64(int64(e.token)), attrLease.String(leaseHex(e.lease)))
	}
	return ctx, observation{span: span}
}

// releaseEnd ends the release's span with its error. A loss whose cause is
// still being found out is recorded as ErrLost: reading its message would
// hold Unlock until the lease lookup answers (see pendingCause).
func (tl *telemetry) releaseEnd(o observation, e releaseEndEvent) {
	err := e.err
	if err != nil && o.span.IsRecording() && e.pending {
		err = ErrLost
	}
	if err != nil && o.span.IsRecording() {
		o.span.RecordError(err)
		if !errors.Is(err, ErrLost) && !errors.Is(err, ErrClosed) {
			o.span.SetStatus(codes.Error, err.Error())
		}
	}
	o.span.End()
}

// lockEnded records the end of a held lock or term: released (cause is
// ErrUnlocked or ErrResigned) or lost.
func (tl *telemetry) lockEnded(e lockEndEvent) {
	ctx := context.Background()
	k := e.kind
	base := tl.attrsOf(k, e.name)
	tl.holders.Add(ctx, -1, base.add...)
	if !e.acquired.IsZero() { // zero: no SDK recorded the duration when it was acquired
		tl.holdDur.Record(ctx, time.Since(e.acquired).Seconds(), base.record...)
	}
	if e.cause == kindTable[k].ended {
		if tl.log.Enabled(ctx, slog.LevelDebug) {
			tl.log.Debug("etcdlock: released", "kind", kindTable[k].name, "name", e.name, "token", int64(e.token), "lease", leaseHex(e.lease))
		}
		return
	}
	c := causeOf(e.cause)
	tl.losses.Add(ctx, 1, tl.attrsCause(k, e.name, c).add...)
	level := slog.LevelWarn
	if c == causeClientClosed {
		level = slog.LevelDebug
	}
	if tl.log.Enabled(ctx, level) {
		tl.log.Log(ctx, level, "etcdlock: lost", "kind", kindTable[k].name, "name", e.name, "token", int64(e.token),
			"lease", leaseHex(e.lease), "cause", causes[c], "owner", e.owner, "err", e.cause)
	}
}

// releaseFailed counts an Unlock or Resign whose request failed.
func (tl *telemetry) releaseFailed(e lockEvent, err error) {
	ctx := context.Background()
	tl.releaseFails.Add(ctx, 1, tl.attrsOf(e.kind, e.name).add...)
	if tl.log.Enabled(ctx, slog.LevelWarn) {
		tl.log.Warn("etcdlock: release failed, retrying in the background", "name", e.name, "token", int64(e.token),
			"lease", leaseHex(e.lease), "err", err)
	}
}

// cleanupRetried counts one background retry of a release or cleanup.
func (tl *telemetry) cleanupRetried() { tl.cleanupRetries.Add(context.Background(), 1) }

// renewed records an acknowledged keepalive.
func (tl *telemetry) renewed(e renewEvent) {
	ctx := context.Background()
	tl.keepaliveDur.Record(ctx, e.rtt.Seconds())
	tl.validityMargin.Record(ctx, e.margin.Seconds())
}

// sessionEnded records a session lost and dropped for a new one.
func (tl *telemetry) sessionEnded(e sessionEndEvent) {
	ctx := context.Background()
	tl.sessionsEnded.Add(ctx, 1)
	if tl.log.Enabled(ctx, slog.LevelWarn) {
		tl.log.Warn("etcdlock: session lost; the next acquisition starts a new one", "lease", leaseHex(e.lease),
			"cause", causes[causeOf(e.cause)], "err", e.cause)
	}
}
