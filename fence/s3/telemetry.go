package s3fence

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/tel"
)

// storeTelemetry is a Store's instruments (see [WithMeterProvider]).
type storeTelemetry struct {
	put, delete *tel.Op
	// claim is GetForUpdate, update Update: each a write (the claim, the
	// new value) that reports like a Put.
	claim, update *tel.Op
	rereads       metric.Int64Counter
	conflicts     metric.Int64Counter
}

func newStoreTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*storeTelemetry, error) {
	r, err := tel.New("s3", "github.com/fencelock/fencelock/fence/s3", mp, tp, "put", "delete", "get_for_update", "update")
	t := &storeTelemetry{put: r.Op("put"), delete: r.Op("delete"), claim: r.Op("get_for_update"), update: r.Op("update")}
	var err1, err2 error
	t.rereads, err1 = r.Counter("fencelock.s3.rereads", "{read}", "Reads of an object after a conditional PUT was refused.")
	t.conflicts, err2 = r.Counter("fencelock.s3.conflicts", "{put}", "Conditional PUTs refused because the object changed (412, 409).")
	return t, errors.Join(err, err1, err2)
}

func (t *storeTelemetry) reread(ctx context.Context)   { t.rereads.Add(ctx, 1) }
func (t *storeTelemetry) conflict(ctx context.Context) { t.conflicts.Add(ctx, 1) }
