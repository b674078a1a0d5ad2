package postgres

import (
	"context"
	"errors"
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
var globalTelemetry = sync.OnceValues(func() (*pgTelemetry, error) { return newPGTelemetry(nil, nil) })

// pgTelemetry is the package's instruments on one pair of providers.
type pgTelemetry struct{ *tel.SQL }

// newPGTelemetry builds the instruments on mp and tp (nil: the global
// providers). On an error it still returns instruments, those the
// providers gave.
func newPGTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*pgTelemetry, error) {
	s, err := tel.NewSQL("postgres", "github.com/fencelock/fencelock/fence/postgres", mp, tp,
		"Fenced writes rolled back by the server (serialization failure or deadlock): safe to run again.")
	return &pgTelemetry{s}, err
}

// write runs fn, one fenced write of op with token whose arguments were
// checked, in a span of its own (a child of ctx's) and counts it by
// outcome, and a rollback the server asks to retry. resource names the
// write on the span; it is called only when an SDK records the span.
func (t *pgTelemetry) write(ctx context.Context, op *tel.Op, token fence.Token, resource func() string,
	fn func(context.Context) error) error {
	ctx, w := op.Start(ctx, token)
	if w.Recording() {
		w.SetResource(resource())
	}
	err := fn(ctx)
	if err != nil && errors.Is(err, ErrRetryable) {
		t.Retryable.Add(ctx, 1)
	}
	w.End(err)
	return err
}
