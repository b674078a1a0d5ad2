package postgres

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/writetel"
)

// telemetry is the package's instruments, on the global OpenTelemetry
// providers (created on first use; they record nothing until the
// application installs an SDK).
var telemetry = sync.OnceValue(func() *pgTelemetry { return newPGTelemetry(nil, nil) })

type pgTelemetry struct {
	*writetel.Recorder
	retryable metric.Int64Counter
}

// traced runs one fenced write op of resource under token, traced and
// counted.
func traced(ctx context.Context, op, resource string, token fence.Token, write func(context.Context) error) error {
	tel := telemetry()
	ctx, end := tel.Write(ctx, op, resource, token)
	err := write(ctx)
	if errors.Is(err, ErrRetryable) {
		tel.retryable.Add(ctx, 1)
	}
	end(err)
	return err
}

// newPGTelemetry builds the instruments on mp and tp (nil: the global
// providers).
func newPGTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *pgTelemetry {
	r, _ := writetel.New("postgres", "github.com/fencelock/fencelock/fence/postgres", mp, tp,
		"update", "upsert", "tx", "put", "delete")
	retryable, _ := r.Counter("fencelock.postgres.retryable_errors", "{error}",
		"Fenced writes rolled back by the server (serialization failure or deadlock): safe to run again.")
	return &pgTelemetry{Recorder: r, retryable: retryable}
}
