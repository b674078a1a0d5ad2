package postgres

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/writetel"
)

// globalTelemetry is the instruments on the global OpenTelemetry providers,
// shared by every Table, Fences and Store given no provider (created on
// first use; they record nothing until the application installs an SDK).
var globalTelemetry = sync.OnceValue(func() *pgTelemetry { return newPGTelemetry(nil, nil) })

// pgTelemetry is the package's instruments on one pair of providers.
type pgTelemetry struct {
	update, upsert, tx, put, delete *writetel.Op
	retryable                       metric.Int64Counter
}

// newPGTelemetry builds the instruments on mp and tp (nil: the global
// providers).
func newPGTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *pgTelemetry {
	r, _ := writetel.New("postgres", "github.com/fencelock/fencelock/fence/postgres", mp, tp,
		"update", "upsert", "tx", "put", "delete")
	retryable, _ := r.Counter("fencelock.postgres.retryable_errors", "{error}",
		"Fenced writes rolled back by the server (serialization failure or deadlock): safe to run again.")
	return &pgTelemetry{update: r.Op("update"), upsert: r.Op("upsert"), tx: r.Op("tx"), put: r.Op("put"),
		delete: r.Op("delete"), retryable: retryable}
}

// orGlobal returns t, or the instruments on the global providers when t
// is nil (no provider was given).
func (t *pgTelemetry) orGlobal() *pgTelemetry {
	if t == nil {
		return globalTelemetry()
	}
	return t
}

// end ends the write w with err, counting a retryable rollback.
func (t *pgTelemetry) end(ctx context.Context, w writetel.Write, err error) error {
	if err != nil && errors.Is(err, ErrRetryable) {
		t.retryable.Add(ctx, 1)
	}
	w.End(err)
	return err
}
