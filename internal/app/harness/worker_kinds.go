package harness

import (
	"context"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// permit takes a permit of the run's semaphore, which has a permit per key
// (KindSemaphore), and writes the resources of its slot's key: each
// resource is fenced by the tokens of one slot, which increase from holder
// to holder of the slot as a lock's do. A deposed holder of slot i (paused
// past its lease) is refused once the next holder of slot i wrote.
func (w *worker) permit(ctx context.Context) {
	lock := w.acquire(ctx, "", func(ctx context.Context) (*etcdlock.Lock, error) {
		sm, err := w.locks.Semaphore(w.cfg.Keys[0]+"-pool", len(w.cfg.Keys))
		if err != nil {
			return nil, err
		}
		return sm.Acquire(ctx)
	})
	if lock == nil {
		w.ctl.pause(retryPause)
		return
	}
	defer w.unlock(ctx, lock)
	w.work(ctx, ctx, lock, w.cfg.Keys[lock.Slot()])
}

// share takes key's read/write lock as a reader (KindRW) and reads its
// resources; readers write nothing, so the resources are fenced by the
// writers' tokens, each greater than every earlier holder's, readers'
// included.
func (w *worker) share(ctx context.Context, key string) {
	lock := w.acquire(ctx, key, func(ctx context.Context) (*etcdlock.Lock, error) { return w.locks.RLock(ctx, key) })
	if lock == nil {
		w.ctl.pause(retryPause)
		return
	}
	defer w.unlock(ctx, lock)
	for _, kind := range w.shuffled(check.ResKinds) {
		w.read(ctx, kind, key)
	}
}
