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
type pgTelemetry struct {
	update, upsert, tx, put, delete, exec *tel.Op
	retryable                             metric.Int64Counter
}

// newPGTelemetry builds the instruments on mp and tp (nil: the global
// providers). On an error it still returns instruments, those the
// providers gave.
func newPGTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*pgTelemetry, error) {
	r, err := tel.New("postgres", "github.com/fencelock/fencelock/fence/postgres", mp, tp,
		"update", "upsert", "tx", "put", "delete", "exec")
	retryable, rerr := r.Counter("fencelock.postgres.retryable_errors", "{error}",
		"Fenced writes rolled back by the server (serialization failure or deadlock): safe to run again.")
	return &pgTelemetry{update: r.Op("update"), upsert: r.Op("upsert"), tx: r.Op("tx"), put: r.Op("put"),
		delete: r.Op("delete"), exec: r.Op("exec"), retryable: retryable}, errors.Join(err, rerr)
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
		t.retryable.Add(ctx, 1)
	}
	w.End(err)
	return err
}
