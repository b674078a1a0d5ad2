package etcdlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	l.c.watches.add(l.ctx, &l.kw.w, int64(l.token)+1)
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
		if err := l.unlockedOrDeleted(l.ctx); err != nil {
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
	ctx := l.ctx
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

// refreshBatchSize is how many keys refresh reads in one transaction
// (etcd's default limit is 128 operations), and refreshParallel how many
// of those transactions are in flight.
const (
	refreshBatchSize = 64
	refreshParallel  = 8
)

// refresh reads the key of every held lock's watch before a new stream is
// opened: a lock whose key is gone learns why; the others are watched from
// the revision read, so that the new stream neither replays their history
// (which costs etcd a scan from the oldest creation) nor finds it
// compacted. A read that fails leaves the rest to be watched from where
// they were.
func (e *watcher) refresh(life context.Context) {
	e.mu.Lock()
	var ws []*watch
	for _, w := range e.watches {
		if w.token != 0 {
			ws = append(ws, w)
		}
	}
	e.mu.Unlock()
	// A few transactions at a time: 10,000 keys one after the other would
	// leave the locks unwatched for 157 round trips.
	var failed atomic.Bool
	var wg sync.WaitGroup
	inflight := make(chan struct{}, refreshParallel)
	for len(ws) > 0 && life.Err() == nil && !failed.Load() {
		batch := ws[:min(len(ws), refreshBatchSize)]
		ws = ws[len(batch):]
		inflight <- struct{}{}
		wg.Go(func() {
			defer func() { <-inflight }()
			if !e.refreshKeys(life, batch) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
}

// refreshKeys reads the keys of batch in one transaction (see refresh);
// false if the read failed.
func (e *watcher) refreshKeys(life context.Context, batch []*watch) bool {
	ops := make([]clientv3.Op, len(batch))
	for i, w := range batch {
		ops[i] = clientv3.OpGet(w.key, clientv3.WithKeysOnly())
	}
	ctx, cancel := context.WithTimeout(life, e.c.o.cleanupTimeout)
	resp, err := e.c.cli.Txn(ctx).Then(ops...).Commit()
	cancel()
	if err != nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, w := range batch {
		if e.watches[w.id] != w {
			continue // removed meanwhile
		}
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 || kvs[0].CreateRevision != w.token {
			e.end(w, true, nil)
			continue
		}
		w.rev = max(w.rev, resp.Header.Revision+1)
	}
	return true
}
