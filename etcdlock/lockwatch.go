package etcdlock

import (
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watchDelay is how long a lock is held before its key is watched. Most
// critical sections are shorter, and a watch per acquisition would cost
// them ~15% of Lock+Unlock. The watch starts from the revision after the
// key's creation, so a deletion in the first watchDelay is still reported,
// at most watchDelay plus etcd's 100 ms catch-up later. Loss of the lease is
// watched by the session from the start.
const watchDelay = 50 * time.Millisecond

// keyWatch is a held lock's watch of its own key, for a deletion by
// someone else (see watcher).
type keyWatch struct {
	w       watch       // on the Client's stream; its id, rev and since are guarded by the watcher's mutex
	timer   *time.Timer // starts the watch (see watchDelay); nil WithoutKeyWatch
	backoff backoff     // the pause before the next watch after one ended early; recheck's alone
}

// startWatch watches l's key for deletion; it runs watchDelay after the
// acquisition, on a timer that holds a count of c.wg.
func (l *Lock) startWatch() {
	defer l.c.wg.Done()
	l.c.watches.add(l.life(), &l.kw.w, int64(l.token)+1)
}

// A Lock is told of its key's watch (see watchSink).
func (l *Lock) watchCreated(int64)          {}
func (l *Lock) watchEvents([]*mvccpb.Event) {}
func (l *Lock) watchEnded(deleted bool, _ error) {
	if deleted {
		l.c.watches.spawn(l.deleted)
		return
	}
	l.c.watches.spawn(l.recheck)
}

// leaseLookup bounds the lease lookup that names the cause of a deletion
// (goneCause), and so how long reading that cause can wait.
const leaseLookup = time.Second

// deleted ends the lock after etcd reported its key deleted. Done closes
// at once, and the cause, which takes a request to find out (goneCause),
// follows in the error Err returns; the end is counted and logged with the
// cause. While Unlock runs, it is left to tell (unlockedOrDeleted).
func (l *Lock) deleted() {
	if l.unlocking.Load() {
		if err := l.unlockedOrDeleted(l.life()); err != nil {
			l.end(err)
		}
		return
	}
	if err := l.s.Err(); err != nil {
		l.end(sessionCause(err))
		return
	}
	p := &pendingCause{settled: make(chan struct{})}
	cause := lost(p)
	if !l.closeDone(cause) {
		return
	}
	l.s.removeLock(l)
	p.settle(l.goneCause(leaseLookup))
	l.afterEnd(cause)
}

// recheck decides, after etcd ended the key's watch (compaction, a missing
// permission), whether the key is still there; if so the watch resumes
// from the revision it was read at, after a pause that doubles while
// watches end early, so that refused watches make no busy loop.
func (l *Lock) recheck() {
	ctx := l.life()
	l.kw.backoff.resetIfLasted(l.kw.w.since)
	resp, err := l.c.cli.Get(ctx, l.t.holdKey())
	switch {
	case ctx.Err() != nil:
		return // the lock ended, and whoever ended it said why
	case err != nil:
		l.end(lost(fmt.Errorf("watch ended and the key could not be read: %w", err)))
		return
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != int64(l.token):
		l.deleted()
		return
	}
	if l.s.pause(ctx, &l.kw.backoff) != nil {
		return
	}
	l.c.watches.add(ctx, &l.kw.w, resp.Header.Revision+1)
}

// spawn runs f in a goroutine of its own, counted in c.wg. The caller holds
// a count of c.wg, itself or through the goroutine that waits for it: the
// reader does, and refresh's reads run while the reader waits for them.
func (e *watcher) spawn(f func()) {
	e.c.wg.Add(1)
	go func() {
		defer e.c.wg.Done()
		f()
	}()
}
