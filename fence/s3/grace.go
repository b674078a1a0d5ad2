package s3fence

import (
	"context"
	"sync"
	"time"
)

// withGrace returns a context that ends grace after ctx ends, keeping ctx's
// values. With grace 0 it is ctx itself. The caller must call the returned
// function once done with the context.
func withGrace(ctx context.Context, grace time.Duration) (context.Context, func()) {
	if grace == 0 {
		return ctx, func() {}
	}
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, cancel)
	})
	return gctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
