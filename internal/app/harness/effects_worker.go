package harness

import (
	"context"
	"fmt"
	"sync"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// effects is a section of the effects workload (KindEffects): it takes
// two random accounts' locks with LockAll and makes one transfer between
// them, with its effects (fxStores.transfer), holding before its
// transaction or inside it, at random.
func (w *worker) effects(ctx context.Context) {
	from, to := w.accounts()
	ml := w.lockAll(ctx, from, to)
	if ml == nil {
		w.ctl.pause(retryPause)
		return
	}
	defer w.unlockAll(ctx, ml, from, to)
	w.xfers++
	tf, tt := ml.Lock(from).Token(), ml.Lock(to).Token()
	t := check.Transfer{ID: fmt.Sprintf("%s/x%d", w.cfg.ID, w.xfers), From: from, To: to, Amount: 1 + w.rng.Int64N(bankMaxAmount), Tried: 2}
	seq := w.fxSeq
	w.fxSeq += 2
	w.logTransfer(check.ResEffects, t, tf, func() (check.Transfer, error) {
		err := w.res.fx.transfer(ctx, t, tf, tt, seq, w.rng.IntN(2) == 0)
		done := t
		switch {
		case err == nil:
			done.Acked = 2
		case refused(err):
			done.Tried = 0
		}
		return done, err
	})
}

// startDispatchers runs the worker's dispatchers (runDispatchers) until
// the returned function is called, which waits for them to stop.
func (w *worker) startDispatchers(ctx context.Context) (func(), error) {
	d, closeNC, err := newFxDispatcher(*w.cfg.Fx, w.res.fx.ob)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { runDispatchers(ctx, w.locks, d, *w.cfg.Fx) })
	return func() { cancel(); wg.Wait(); closeNC() }, nil
}
