package etcdlock

import (
	"context"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Carrying the watches of held locks over to the watcher's next stream
// (see watcher): their keys read afresh before it opens.

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
