package harness

import (
	"context"
	"sync"
	"time"

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
	key := w.cfg.Keys[lock.Slot()]
	defer w.unlock(ctx, lock, key)
	w.work(ctx, ctx, lock, key)
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
	defer w.unlock(ctx, lock, key)
	for _, kind := range w.shuffled(w.cfg.ResKinds) {
		w.read(ctx, kind, key)
	}
}

// member joins the run's group, whose partitions are the keys
// (KindGroup), for a membership of 1 to 3 s, and while it owns partition k
// writes key k's resources with the partition's token. The works of the
// partitions it owns take turns (the worker's state is one goroutine's),
// so a nemesis hold stops them all, as a paused process would. Its writes
// run under the worker's context, not the partition's: a write under way
// when the partition moves, or frozen across the move, still reaches the
// resource, which must refuse it.
func (w *worker) member(ctx context.Context) {
	g, err := w.locks.Group(w.cfg.Keys[0]+"-group", len(w.cfg.Keys))
	if err != nil {
		w.ctl.pause(retryPause)
		return
	}
	jctx, cancel := context.WithTimeout(ctx, time.Duration(1000+w.rng.IntN(2000))*time.Millisecond)
	defer cancel()
	go func() {
		select {
		case <-w.ctl.stop:
			cancel()
		case <-jctx.Done():
		}
	}()
	var mu sync.Mutex // the worker's state: one work at a time
	err = g.Join(jctx, func(pctx context.Context, p *etcdlock.Partition) error {
		key := w.cfg.Keys[p.Index()]
		mu.Lock()
		w.log.emit(check.Event{Ev: check.EvLock, Worker: w.cfg.ID, Key: key, OK: true, Token: int64(p.Token())})
		mu.Unlock()
		for pctx.Err() == nil {
			mu.Lock()
			w.work(ctx, pctx, p, key)
			mu.Unlock()
			select { // let the other partitions' works have a turn
			case <-pctx.Done():
			case <-time.After(time.Millisecond):
			}
		}
		mu.Lock()
		w.log.emit(check.Event{Ev: check.EvUnlock, Worker: w.cfg.ID, Key: key, Token: int64(p.Token())})
		mu.Unlock()
		return nil
	}, etcdlock.WithPartitionErrorHandler(func(int, error) {}))
	if err != nil && jctx.Err() == nil {
		w.ctl.pause(retryPause)
	}
}
