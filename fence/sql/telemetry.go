package sqlfence

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/tel"
)

// globalTelemetry is the instruments on the global OpenTelemetry providers,
// shared by every Table, Fences and Store given no provider (created by the
// first of them; they record nothing until the application installs an
// SDK).
var globalTelemetry = sync.OnceValues(func() (*sqlTelemetry, error) { return newSQLTelemetry(nil, nil) })

// sqlTelemetry is the package's instruments on one pair of providers.
type sqlTelemetry struct{ *tel.SQL }

// newSQLTelemetry builds the instruments on mp and tp (nil: the global
// providers). On an error it still returns instruments, those the
// providers gave.
func newSQLTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*sqlTelemetry, error) {
	s, err := tel.NewSQL("sql", "github.com/fencelock/fencelock/fence/sql", mp, tp,
		"Fenced writes rolled back by the server (deadlock, serialization failure or busy lock), each retry or the final error.")
	return &sqlTelemetry{s}, err
}

// telemetry returns the instruments on the chosen providers, or those on
// the global ones, shared, when none was chosen.
func (o options) telemetry() (*sqlTelemetry, error) {
	var t *sqlTelemetry
	var err error
	if o.meters != nil || o.tracers != nil {
		t, err = newSQLTelemetry(o.meters, o.tracers)
	} else {
		t, err = globalTelemetry()
	}
	if err != nil {
		return nil, fmt.Errorf("sqlfence: creating the OpenTelemetry instruments: %w", err)
	}
	return t, nil
}

// write runs fn, one fenced write of op with token whose arguments were
// checked, in a span of its own (a child of ctx's), and counts it by
// outcome. resource names the write on the span; it is called only when
// an SDK records the span.
func (t *sqlTelemetry) write(ctx context.Context, op *tel.Op, token fence.Token, resource func() string,
	fn func(context.Context) error) error {
	ctx, w := op.Start(ctx, token)
	if w.Recording() {
		w.SetResource(resource())
	}
	err := fn(ctx)
	w.End(err)
	return err
}

// retried counts one rollback the server asked to retry.
func (t *sqlTelemetry) retried(ctx context.Context) { t.Retryable.Add(ctx, 1) }

// countRetryable counts err if it is a rollback the server asked to retry.
func (t *sqlTelemetry) countRetryable(ctx context.Context, d Dialect, err error) {
	if d.retryable(err) {
		t.retried(ctx)
	}
}
