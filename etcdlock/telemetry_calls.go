package etcdlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// What the calls of a Lock's life report. Each builds span attributes only
// for a span an SDK records, log arguments only for a level the logger
// takes, and reads the clock only for a duration an SDK records.

// acquireSpan names the span of the call that makes an acquisition.
func acquireSpan(sp spot) string {
	if !sp.wait {
		return kindTable[sp.kind].trySpan
	}
	return kindTable[sp.kind].waitSpan
}

// acquisition is one acquisition of any kind under way, from
// [telemetry.acquiring] to [acquisition.done].
type acquisition struct {
	t     *telemetry
	ctx   context.Context
	span  trace.Span
	start time.Time // zero when neither timed nor logged
	timed bool      // an SDK records the wait's duration
	kind  kind
	name  string
	base  attrs
}

// acquiring starts an acquisition's span and counts a waiter; the
// acquisition's done ends both with the outcome.
func (tl *telemetry) acquiring(ctx context.Context, sp spot) (context.Context, acquisition) {
	k := sp.kind
	ctx, span := tl.tracer.Start(ctx, acquireSpan(sp))
	a := acquisition{t: tl, ctx: ctx, span: span, kind: k, name: sp.name, base: tl.attrsOf(k, sp.name),
		timed: tl.waitDur.Enabled(ctx)}
	if a.timed || tl.log.Enabled(ctx, slog.LevelDebug) {
		a.start = time.Now()
	}
	if span.IsRecording() {
		span.SetAttributes(tl.spanKind[k], attrName.String(sp.name))
	}
	tl.waiters.Add(ctx, 1, a.base.add...)
	return ctx, a
}

// done records the acquisition's outcome: l acquired, or err.
func (a acquisition) done(l *Lock, err error) {
	t, ctx := a.t, a.ctx
	t.waiters.Add(ctx, -1, a.base.add...)
	o := acquisitionOutcome(err)
	if a.timed {
		t.waitDur.Record(ctx, time.Since(a.start).Seconds(), t.attrsOutcome(a.kind, a.name, o).record...)
	}
	if err != nil {
		a.notAcquired(o, err)
		return
	}
	t.acquisitions.Add(ctx, 1, a.base.add...)
	t.holders.Add(ctx, 1, a.base.add...)
	if a.span.IsRecording() {
		a.span.SetAttributes(t.spanOutcome[o], attrToken.Int64(int64(l.token)), attrLease.String(leaseHex(l.s.id)))
	}
	a.span.End()
	if t.log.Enabled(ctx, slog.LevelDebug) {
		t.log.DebugContext(ctx, "etcdlock: acquired", "kind", kindTable[a.kind].name, "name", a.name, "token", int64(l.token),
			"lease", leaseHex(l.s.id), "waited", time.Since(a.start))
	}
}

func (a acquisition) notAcquired(o outcome, err error) {
	if a.span.IsRecording() {
		if o == outcomeError {
			a.span.RecordError(err)
			a.span.SetStatus(codes.Error, err.Error())
		}
		a.span.SetAttributes(a.t.spanOutcome[o])
	}
	a.span.End()
	if a.t.log.Enabled(a.ctx, slog.LevelDebug) {
		a.t.log.DebugContext(a.ctx, "etcdlock: not acquired", "kind", kindTable[a.kind].name, "name", a.name, "outcome", outcomes[o], "err", err)
	}
}

// unlockCall is one Unlock or Resign under way, from [telemetry.releasing]
// to [unlockCall.done].
type unlockCall struct{ span trace.Span }

// releasing starts Unlock's or Resign's span.
func (tl *telemetry) releasing(ctx context.Context, l *Lock) (context.Context, unlockCall) {
	ctx, span := tl.tracer.Start(ctx, kindTable[l.t.kind].releaseSpan)
	if span.IsRecording() {
		span.SetAttributes(attrName.String(l.t.name), attrToken.Int64(int64(l.token)), attrLease.String(leaseHex(l.s.id)))
	}
	return ctx, unlockCall{span}
}

// done ends the release's span with its error. A loss whose cause is still
// being found out is recorded as ErrLost: reading its message would hold
// Unlock until the lease lookup answers (see pendingCause).
func (r unlockCall) done(err error) {
	if err != nil && r.span.IsRecording() && unsettled(err) {
		err = ErrLost
	}
	if err != nil && r.span.IsRecording() {
		r.span.RecordError(err)
		if !errors.Is(err, ErrLost) && !errors.Is(err, ErrClosed) {
			r.span.SetStatus(codes.Error, err.Error())
		}
	}
	r.span.End()
}

// ended records the end of a held lock or term: released (cause is
// ErrUnlocked or ErrResigned) or lost.
func (tl *telemetry) ended(l *Lock, cause error) {
	ctx := context.Background()
	k := l.t.kind
	base := tl.attrsOf(k, l.t.name)
	tl.holders.Add(ctx, -1, base.add...)
	if !l.acquired.IsZero() { // zero: no SDK recorded the duration when it was acquired
		tl.holdDur.Record(ctx, time.Since(l.acquired).Seconds(), base.record...)
	}
	if cause == l.t.ended() {
		if tl.log.Enabled(ctx, slog.LevelDebug) {
			tl.log.Debug("etcdlock: released", "kind", kindTable[k].name, "name", l.t.name, "token", int64(l.token), "lease", leaseHex(l.s.id))
		}
		return
	}
	c := causeOf(cause)
	tl.losses.Add(ctx, 1, tl.attrsCause(k, l.t.name, c).add...)
	level := slog.LevelWarn
	if c == causeClientClosed {
		level = slog.LevelDebug
	}
	if tl.log.Enabled(ctx, level) {
		tl.log.Log(ctx, level, "etcdlock: lost", "kind", kindTable[k].name, "name", l.t.name, "token", int64(l.token),
			"lease", leaseHex(l.s.id), "cause", causes[c], "owner", l.c.o.owner, "err", cause)
	}
}

// releaseFailed counts an Unlock or Resign whose request failed.
func (tl *telemetry) releaseFailed(l *Lock, err error) {
	ctx := context.Background()
	tl.releaseFails.Add(ctx, 1, tl.attrsOf(l.t.kind, l.t.name).add...)
	if tl.log.Enabled(ctx, slog.LevelWarn) {
		tl.log.Warn("etcdlock: release failed, retrying in the background", "name", l.t.name, "token", int64(l.token),
			"lease", leaseHex(l.s.id), "err", err)
	}
}

// retried counts one background retry of a release or cleanup.
func (tl *telemetry) retried() { tl.cleanupRetries.Add(context.Background(), 1) }

// renewed records an acknowledged keepalive.
func (tl *telemetry) renewed(rtt, margin time.Duration) {
	ctx := context.Background()
	tl.keepaliveDur.Record(ctx, rtt.Seconds())
	tl.validityMargin.Record(ctx, margin.Seconds())
}

// sessionEnded records a session lost and dropped for a new one.
func (tl *telemetry) sessionEnded(s *session, cause error) {
	ctx := context.Background()
	tl.sessionsEnded.Add(ctx, 1)
	if tl.log.Enabled(ctx, slog.LevelWarn) {
		tl.log.Warn("etcdlock: session lost; the next acquisition starts a new one", "lease", leaseHex(s.id),
			"cause", causes[causeOf(cause)], "err", cause)
	}
}
