package sqlfence

import (
	"context"
	"math/rand/v2"
	"time"
)

// retry runs attempt until it returns an error that d does not call
// retryable, tries more than retries times, or ctx ends. Only writes that
// changed nothing when they failed that way may be retried: a single
// statement in autocommit, or a fenced transaction before its function.
// The pause between tries grows from about 1 ms to about 50 ms, jittered
// so that writers that collided do not collide again. Each retryable
// error is counted on t.
func retry(ctx context.Context, d Dialect, retries int, t *sqlTelemetry, attempt func() error) error {
	pause := time.Millisecond
	for try := 0; ; try++ {
		err := attempt()
		if err == nil || !d.retryable(err) {
			return err
		}
		t.retried(ctx)
		if try >= retries {
			return err
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// once runs attempt a single time, in the caller's transaction, where a
// retryable error is returned rather than retried; it is counted on t as
// retry counts its own.
func once(ctx context.Context, d Dialect, t *sqlTelemetry, attempt func() error) error {
	err := attempt()
	t.countRetryable(ctx, d, err)
	return err
}
