package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Per-call bounds inside a worker.
const (
	writeTimeout  = 10 * time.Second // one write, a possible nemesis hold included
	unlockTimeout = 2 * time.Second
	retryPause    = 50 * time.Millisecond // after a failed Lock
)

// worker is one worker process's state.
type worker struct {
	cfg   workerConfig
	log   *eventLog
	ctl   *control
	locks *etcdlock.Client
	res   *resources
	rng   *rand.Rand
	seq   int64
	xfers int64         // bank transfers begun, for their IDs
	fxSeq int64         // effects recorded, for their Seq (KindEffects)
	kind  check.ResKind // of the write under way, for hold
}

// runWorker loops lock -> writes -> unlock until stdin is closed.
func runWorker(cfg workerConfig, stdin io.Reader, stdout io.Writer) error {
	ctx := context.Background()
	metrics := installMetrics()
	inj := reqfault.New(uint64(cfg.Seed)) // armed by the nemesis, one request at a time
	defer inj.Close()
	// The endpoints are the worker's own proxies, one per member slot, and
	// stay right through member replacements (a replacement keeps its
	// slot's URLs). No AutoSyncInterval: a sync would swap them for the
	// members' advertised URLs and route around the proxies, and partitions
	// would cut nothing.
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Etcd, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: inj.DialOptions()})
	if err != nil {
		return err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(cfg.TTL), etcdlock.WithCleanupTimeout(time.Second))
	if err != nil {
		return err
	}
	defer locks.Close(ctx)
	w := &worker{
		cfg: cfg, log: &eventLog{w: stdout}, ctl: readControl(stdin, inj),
		locks: locks, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 1)),
	}
	res, err := openResources(ctx, cfg, cli, w.hold)
	if err != nil {
		return err
	}
	defer res.close()
	w.res = res
	if res.fx != nil && cfg.Fenced {
		stop, err := w.startDispatchers(ctx)
		if err != nil {
			return err
		}
		defer stop()
	}
	for !w.ctl.stopped() {
		w.section(ctx)
		w.log.emit(check.Event{Ev: check.EvMetrics, Worker: cfg.ID, Metrics: metrics.snapshot(ctx)})
	}
	return nil
}

// section takes a random key's lock, writes its resources and unlocks; or,
// in an election run, leads the key's election for one term; or does what
// the run's Kind says.
func (w *worker) section(ctx context.Context) {
	key := w.cfg.Keys[w.rng.IntN(len(w.cfg.Keys))]
	switch {
	case w.cfg.Election:
		w.elect(ctx, key)
		return
	case w.cfg.Kind == KindSemaphore:
		w.permit(ctx)
		return
	case w.cfg.Kind == KindBank:
		w.bank(ctx)
		return
	case w.cfg.Kind == KindEffects:
		w.effects(ctx)
		return
	case w.cfg.Kind == KindGroup:
		w.member(ctx)
		return
	case w.cfg.Kind == KindRW && w.rng.IntN(2) == 0:
		w.share(ctx, key)
		return
	}
	lock := w.lock(ctx, key)
	if lock == nil {
		w.ctl.pause(retryPause)
		return
	}
	defer w.unlock(ctx, lock, key)
	w.work(ctx, ctx, lock, key)
}

// elect runs key's election with Client.Run until it has led one term (its
// campaign bounded by LockTimeout), writing with the term's token; a term
// is logged as a lock event. Run resigns when the term's work is done.
func (w *worker) elect(ctx context.Context, key string) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var won atomic.Bool
	timeout := time.AfterFunc(w.cfg.LockTimeout, func() {
		if !won.Load() {
			cancel()
		}
	})
	defer timeout.Stop()
	err := w.locks.Run(rctx, key, w.cfg.ID, func(tctx context.Context, term *etcdlock.Term) error {
		if rctx.Err() != nil || won.Swap(true) {
			return nil
		}
		w.log.emit(check.Event{Ev: check.EvLock, Worker: w.cfg.ID, Key: key, WaitNs: int64(time.Since(start)), OK: true, Token: int64(term.Token())})
		w.work(ctx, tctx, term, key)
		w.log.emit(check.Event{Ev: check.EvUnlock, Worker: w.cfg.ID, Key: key, Token: int64(term.Token())})
		cancel() // one term per section
		return nil
	})
	if !won.Load() {
		w.log.emit(check.Event{Ev: check.EvLock, Worker: w.cfg.ID, Key: key, WaitNs: int64(time.Since(start)), Err: fmt.Sprint(err)})
		w.ctl.pause(retryPause)
	}
}

// work reads and writes key's resources under holder's token. The writes
// run under ctx, not under the term's context tctx (a lock's is ctx too):
// a write already under way when the term ends, or frozen by the nemesis
// across its end, still reaches the resource, which must refuse it. A
// holder that sees tctx end makes no new write.
func (w *worker) work(ctx, tctx context.Context, holder fence.Holder, key string) {
	g, err := fence.NewGuard(holder)
	if err != nil {
		return
	}
	kinds := w.shuffled(w.cfg.ResKinds)
	for _, kind := range kinds {
		w.read(ctx, kind, key)
	}
	for range w.cfg.WritesPerLock {
		for _, kind := range kinds {
			if tctx.Err() != nil || w.write(ctx, g, kind, key) == check.OutLost {
				return
			}
		}
	}
}

// shuffled returns a copy of kinds in random order, so that the
// nemesis's holds land on every kind.
func (w *worker) shuffled(kinds []check.ResKind) []check.ResKind {
	kinds = append([]check.ResKind(nil), kinds...)
	w.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

// read logs the current value of key's resource of the given kind; the
// checker's linearizability check uses it. Failed reads are not logged.
func (w *worker) read(ctx context.Context, kind check.ResKind, key string) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	call := time.Now().UnixNano()
	val, err := w.res.read(ctx, kind, key)
	if err == nil {
		w.log.emit(check.Event{Ev: check.EvRead, Worker: w.cfg.ID, Key: key, Res: kind, Value: val, Call: call})
	}
}

func (w *worker) lock(ctx context.Context, key string) *etcdlock.Lock {
	return w.acquire(ctx, key, func(ctx context.Context) (*etcdlock.Lock, error) { return w.locks.Lock(ctx, key) })
}

// acquire takes a lock with take, bounded by LockTimeout, and logs the
// call's event for key ("": the key of the permit's slot).
func (w *worker) acquire(ctx context.Context, key string, take func(context.Context) (*etcdlock.Lock, error)) *etcdlock.Lock {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.LockTimeout)
	defer cancel()
	start := time.Now()
	lock, err := take(ctx)
	e := check.Event{Ev: check.EvLock, Worker: w.cfg.ID, Key: key, WaitNs: int64(time.Since(start)), OK: err == nil}
	if err != nil {
		e.Err = err.Error()
	} else {
		e.Token = int64(lock.Token())
		if key == "" {
			e.Key = w.cfg.Keys[lock.Slot()]
		}
	}
	w.log.emit(e)
	return lock
}

// unlock releases lock, the lock of key, and logs the end of its hold.
func (w *worker) unlock(ctx context.Context, lock *etcdlock.Lock, key string) {
	ctx, cancel := context.WithTimeout(ctx, unlockTimeout)
	defer cancel()
	_ = lock.Unlock(ctx)
	w.log.emit(check.Event{Ev: check.EvUnlock, Worker: w.cfg.ID, Key: key, Token: int64(lock.Token())})
}

// hold, when the nemesis has armed this worker, reports the hold and waits
// to be let go; the nemesis freezes or kills the worker meanwhile.
func (w *worker) hold() {
	w.ctl.hold(w.kind, func() { w.log.emit(check.Event{Ev: check.EvHold, Worker: w.cfg.ID, Seq: w.seq}) })
}

// write makes one fenced (or, in the control, unfenced) write with a value
// no other write carries, logging its invocation and its outcome.
func (w *worker) write(ctx context.Context, g *fence.Guard, kind check.ResKind, key string) check.Outcome {
	w.seq++
	w.kind = kind
	tok := g.Token()
	e := check.Event{Worker: w.cfg.ID, Key: key, Res: kind, Token: int64(tok), Seq: w.seq}
	e.Value = fmt.Sprintf("%s/t%d/s%d", w.cfg.ID, tok, w.seq)
	e.Ev = check.EvInvoke
	w.log.emit(e)
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err := g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
		return w.res.write(ctx, kind, key, tok, e.Value) // holds, when armed, just before sending
	})
	e.Ev, e.Time, e.Outcome = check.EvDone, 0, check.OutcomeOf(err)
	if err != nil && !errors.Is(err, fence.ErrStale) {
		e.Err = err.Error()
	}
	w.log.emit(e)
	return e.Outcome
}
