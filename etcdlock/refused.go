package etcdlock

import (
	"context"
	"log/slog"

	"github.com/fencelock/fencelock/fence"
)

var _ fence.RefusalObserver = (*Lock)(nil)

// WriteRefused implements [fence.RefusalObserver]: a [fence.Guard] calls it
// when it refuses a write of l locally, because l is lost or its validity
// deadline has passed. It counts the write in fencelock.writes (attributes
// fencelock.adapter "guard", fencelock.operation "write",
// fencelock.outcome "lock_lost") and as a span guard.write, a child of
// ctx with the lock's name and token, and logs it at warn level with the lock's name, token and
// lease. It never blocks on I/O and is safe for concurrent use; code other
// than a Guard has no reason to call it.
func (l *Lock) WriteRefused(ctx context.Context, err error) { l.c.tel.writeRefused(ctx, l, err) }

// WriteRefused implements [fence.RefusalObserver]; see [Lock.WriteRefused].
func (t *Term) WriteRefused(ctx context.Context, err error) { t.l.WriteRefused(ctx, err) }

// writeRefused records a write a Guard refused for l.
func (t *telemetry) writeRefused(ctx context.Context, l *Lock, err error) {
	ctx, w := t.refused.Start(ctx, l.token)
	if w.Recording() {
		w.SetResource(l.t.name)
	}
	w.End(err)
	if t.log.Enabled(ctx, slog.LevelWarn) {
		t.log.WarnContext(ctx, "etcdlock: write refused by the guard: lock lost", "kind", kinds[l.t.kind], "name", l.t.name,
			"token", int64(l.token), "lease", leaseHex(l.s.id), "err", err)
	}
}
