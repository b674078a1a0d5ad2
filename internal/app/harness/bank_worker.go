package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// bankMaxAmount is the largest amount a transfer moves (the least is 1).
const bankMaxAmount = 20

// bank is a section of the bank workload (KindBank): it takes two random
// accounts' locks with LockAll and moves a random amount from one to the
// other on every bank store, in random order, with each account's writes
// fenced by its own lock's token. A transfer the guard refuses (the lock
// is lost) ends the section.
func (w *worker) bank(ctx context.Context) {
	from, to := w.accounts()
	ml := w.lockAll(ctx, from, to)
	if ml == nil {
		w.ctl.pause(retryPause)
		return
	}
	defer w.unlockAll(ctx, ml, from, to)
	gf, errf := fence.NewGuard(ml.Lock(from))
	gt, errt := fence.NewGuard(ml.Lock(to))
	if errors.Join(errf, errt) != nil {
		return
	}
	w.xfers++
	t := check.Transfer{ID: fmt.Sprintf("%s/x%d", w.cfg.ID, w.xfers), From: from, To: to, Amount: 1 + w.rng.Int64N(bankMaxAmount)}
	for _, kind := range w.shuffled(check.BankKinds) {
		if w.transfer(ctx, kind, t, gf, gt) == check.OutLost {
			return
		}
	}
}

// accounts returns two distinct random accounts (keys).
func (w *worker) accounts() (string, string) {
	n := len(w.cfg.Keys)
	i, j := w.rng.IntN(n), w.rng.IntN(n-1)
	if j >= i {
		j++
	}
	return w.cfg.Keys[i], w.cfg.Keys[j]
}

// lockAll takes the locks of names with LockAll, bounded by LockTimeout,
// and logs a lock event for each name, with its lock's token.
func (w *worker) lockAll(ctx context.Context, names ...string) *etcdlock.MultiLock {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.LockTimeout)
	defer cancel()
	start := time.Now()
	ml, err := w.locks.LockAll(ctx, names)
	for _, name := range names {
		e := check.Event{Ev: check.EvLock, Worker: w.cfg.ID, Key: name, WaitNs: int64(time.Since(start)), OK: err == nil}
		if err != nil {
			e.Err = err.Error()
		} else {
			e.Token = int64(ml.Lock(name).Token())
		}
		w.log.emit(e)
	}
	if err != nil {
		return nil
	}
	return ml
}

// unlockAll releases ml, the locks of names, and logs the end of each
// one's hold.
func (w *worker) unlockAll(ctx context.Context, ml *etcdlock.MultiLock, names ...string) {
	ctx, cancel := context.WithTimeout(ctx, unlockTimeout)
	defer cancel()
	_ = ml.Unlock(ctx)
	for _, name := range names {
		w.log.emit(check.Event{Ev: check.EvUnlock, Worker: w.cfg.ID, Key: name, Token: int64(ml.Lock(name).Token())})
	}
}

// transfer makes t on the store of kind (logTransfer).
func (w *worker) transfer(ctx context.Context, kind check.ResKind, t check.Transfer, from, to *fence.Guard) check.Outcome {
	t.Acked, t.Tried = 0, 2
	return w.logTransfer(kind, t, from.Token(), func() (check.Transfer, error) {
		return w.res.bank.transfer(ctx, kind, t, from, to)
	})
}

// logTransfer makes t on the resource of kind with do, logging its
// invocation (at t.From's token tok) and its outcome: the done event's
// Transfer, do's, says which legs may have landed, and its Call when it
// was invoked (for the history's estimate).
func (w *worker) logTransfer(kind check.ResKind, t check.Transfer, tok fence.Token, do func() (check.Transfer, error)) check.Outcome {
	w.seq++
	w.kind = kind
	e := check.Event{Ev: check.EvInvoke, Worker: w.cfg.ID, Key: t.From, Res: kind, Token: int64(tok), Seq: w.seq,
		Value: t.ID, Time: time.Now().UnixNano(), Transfer: &t}
	w.log.emit(e)
	done, err := do()
	e.Ev, e.Call, e.Time, e.Outcome, e.Transfer = check.EvDone, e.Time, 0, check.OutcomeOf(err), &done
	if err != nil && !errors.Is(err, fence.ErrStale) {
		e.Err = err.Error()
	}
	w.log.emit(e)
	return e.Outcome
}
