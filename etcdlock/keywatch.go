package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// watchDelay is how long a lock is held before its key is watched. Most
// critical sections are shorter, and a watch per acquisition would cost
// them ~15% of Lock+Unlock. The watch starts from the revision after the
// key's creation, so a deletion in the first watchDelay is still reported,
// at most watchDelay plus etcd's 100 ms catch-up later. Loss of the lease is
// watched by the session from the start.
const watchDelay = 50 * time.Millisecond

// keyWatcher watches the keys of a Client's held locks for deletion by
// someone else, all on one Watch stream that it opens, writes and reads
// itself.
//
// clientv3 runs a goroutine with its own channels and buffers for each
// watch (about 9 KB per held lock, see BENCHMARKS.md "Scale") and creates
// the watches of a stream one at a time. Here a watched lock costs a map
// entry, and creations are pipelined: each carries a watch ID chosen here,
// and etcd answers a stream's creations in the order they were sent (a
// refused one with no ID), holding back a watch's events until its
// creation is answered. One goroutine reads the stream and one writes it,
// so that nobody who adds or removes a watch waits for the network.
//
// Whatever ends one watch on etcd's side (compaction, a refusal) makes the
// lock read its key again (recheck) and watch on from there; whatever ends
// the stream (no leader, a member gone, an auth token etcd no longer
// accepts) makes the reader read every watched key (refresh) and open a new
// stream that creates every watch again from the revision it was read at,
// or, if the read failed, the revision it was created at: either way a
// deletion in between is reported.
//
// A stream can also hang: the connection works (keepalives, on a stream of
// their own, are acknowledged) but the watch stream delivers nothing. While
// it carries watches, a third goroutine (not the writer, which blocks in
// Send once etcd stops reading a hung stream) probes it every third of the
// lease TTL with a watch creation, which etcd answers on the same path as
// it sends events, whether or not the watches are in sync; a probe
// unanswered at the next tick, with nothing else heard from the stream
// meanwhile, ends it, as a failure would.
type keyWatcher struct {
	c *Client

	mu        sync.Mutex
	watches   map[int64]*Lock // by watch ID
	nextID    int64
	running   bool                 // the reader's goroutine runs
	stream    pb.Watch_WatchClient // the current stream, nil while there is none
	endStream context.CancelFunc   // ends stream
	queue     []*pb.WatchRequest   // for the writer to send on stream
	wake      chan struct{}        // the queue has grown: wakes stream's writer (buffer 1)
	sent      []int64              // creations sent on stream, unanswered, in order
	sentMax   int64                // highest watch ID whose creation was sent on stream
	probeID   int64                // the last probe's watch ID, 0 once answered
	heard     bool                 // stream delivered something since the watchdog's last tick
}

func newKeyWatcher(c *Client) *keyWatcher {
	return &keyWatcher{c: c, watches: make(map[int64]*Lock)}
}

// add watches l's key for deletion from revision rev on, unless l ended.
// The caller holds a count of c.wg.
func (w *keyWatcher) add(l *Lock, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.wctx.Err() != nil {
		return
	}
	w.nextID++
	id := w.nextID
	l.watchID, l.wrev, l.wsince = id, rev, time.Now()
	w.watches[id] = l
	if w.stream != nil {
		w.push(createRequest(id, l))
	}
	if !w.running {
		w.running = true
		w.c.wg.Add(1)
		go w.run()
	}
}

// remove stops watching l's key; l's watch context has ended.
func (w *keyWatcher) remove(l *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drop(l)
}

// drop removes l's watch, and cancels it on etcd's side if its creation
// was sent; w.mu is held.
func (w *keyWatcher) drop(l *Lock) {
	id := l.watchID
	if id == 0 {
		return
	}
	w.forget(l)
	if w.stream != nil && id <= w.sentMax {
		w.push(cancelRequest(id))
	}
}

// forget removes l's watch here only; w.mu is held.
func (w *keyWatcher) forget(l *Lock) {
	delete(w.watches, l.watchID)
	l.watchID = 0
}

func cancelRequest(id int64) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
		CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
}

// push queues req for the writer; w.mu is held, and there is a stream.
func (w *keyWatcher) push(req *pb.WatchRequest) {
	w.queue = append(w.queue, req)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func createRequest(id int64, l *Lock) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key:           []byte(l.t.key),
		StartRevision: l.wrev,
		WatchId:       id,
		Filters:       deletesOnly,
	}}}
}

// The filters of a lock's watch (deletions only) and of a probe (nothing).
// Shared: requests are only read, when they are marshalled.
var (
	deletesOnly = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
	noEvents    = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT, pb.WatchCreateRequest_NODELETE}
)

// run keeps a stream open and reads it until the Client is closed,
// pausing before each new stream as waiters do, so that refused streams
// make no busy loop.
func (w *keyWatcher) run() {
	defer w.c.wg.Done()
	backoff := minWatchBackoff
	life := w.c.life
	for life.Err() == nil {
		start := time.Now()
		w.serve(life)
		retryPause(life, start, &backoff)
	}
	w.mu.Lock()
	w.running = false
	w.mu.Unlock()
}

// serve opens a stream, creates every watch on it and reads it until it
// fails. etcd closes a stream opened WithRequireLeader when its member
// loses the leader, so that the next one goes to a member that has one.
func (w *keyWatcher) serve(life context.Context) {
	w.refresh(life)
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(life))
	defer cancel()
	stream, err := pb.NewWatchClient(w.c.cli.ActiveConnection()).Watch(ctx, grpc.WaitForReady(true))
	if err != nil {
		return
	}
	w.mu.Lock()
	ids := slices.Sorted(maps.Keys(w.watches)) // creations go in ID order, so sentMax tells what was sent
	// A wake channel per stream, so that a writer of an earlier stream
	// still on its way out cannot take this one's wake-up.
	wake := make(chan struct{}, 1)
	w.stream, w.endStream, w.queue, w.wake, w.sent, w.sentMax, w.probeID, w.heard = stream, cancel, nil, wake, nil, 0, 0, false
	for _, id := range ids {
		w.push(createRequest(id, w.watches[id]))
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.stream, w.endStream, w.queue, w.wake, w.sent, w.sentMax = nil, nil, nil, nil, nil, 0
		w.mu.Unlock()
	}()

	w.c.wg.Add(2)
	go func() {
		defer w.c.wg.Done()
		defer cancel() // a failed send ends the stream
		w.write(ctx, stream, wake)
	}()
	go func() {
		defer w.c.wg.Done()
		defer cancel() // so does an unanswered probe
		w.watchdog(ctx, stream)
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		if err := w.handle(resp); err != nil {
			return
		}
	}
}

// write sends the queued requests on stream until ctx ends or a send
// fails.
func (w *keyWatcher) write(ctx context.Context, stream pb.Watch_WatchClient, wake <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		for {
			w.mu.Lock()
			if w.stream != stream || len(w.queue) == 0 {
				w.mu.Unlock()
				break
			}
			req := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			if cr := req.GetCreateRequest(); cr != nil {
				if _, ok := w.watches[cr.WatchId]; !ok && cr.WatchId != w.probeID {
					w.mu.Unlock()
					continue // removed before it was sent
				}
				w.sent = append(w.sent, cr.WatchId)
				w.sentMax = cr.WatchId
			}
			w.mu.Unlock()
			if err := stream.Send(req); err != nil {
				return
			}
		}
	}
}

// watchdog probes stream (see keyWatcher) while it carries watches, until
// ctx ends or stream is found hung (see probe). It is not the writer:
// a hung stream stops being read on etcd's side once its answers back up,
// and the writer then blocks in Send.
func (w *keyWatcher) watchdog(ctx context.Context, stream pb.Watch_WatchClient) {
	probe := time.NewTicker(max(w.c.o.ttl/3, minProbeInterval))
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-probe.C:
			if !w.probe(stream) {
				return // the probe unanswered, nothing heard since the last tick: the stream hangs
			}
		}
	}
}

// minProbeInterval bounds how often a stream is probed with a short TTL.
const minProbeInterval = 500 * time.Millisecond

// probe queues a probe of stream if it carries watches; it reports false
// if the last probe is still unanswered and stream delivered nothing since
// the last tick. A probe queued behind thousands of creations (a new
// stream, a slow link) is answered after them: while their answers come, the
// stream works. A probe is a watch of the prefix key itself, which the role
// that may lock may read, from the current revision, for no events,
// cancelled once created.
func (w *keyWatcher) probe(stream pb.Watch_WatchClient) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stream != stream {
		return true
	}
	heard := w.heard
	w.heard = false
	if w.probeID != 0 {
		return heard
	}
	if len(w.watches) == 0 {
		return true
	}
	w.nextID++
	w.probeID = w.nextID
	w.push(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key:     []byte(w.c.o.prefix),
		WatchId: w.probeID,
		Filters: noEvents,
	}}})
	return true
}

// refreshBatch is how many keys refresh reads in one transaction (etcd's
// default limit is 128 operations).
const refreshBatch = 64

// refresh reads every watched key before a new stream is opened: a lock
// whose key is gone learns why; the others are watched from the revision
// read, so that the new stream neither replays their history (which costs
// etcd a scan from the oldest creation) nor finds it compacted. A read that
// fails leaves the rest to be watched from where they were.
func (w *keyWatcher) refresh(life context.Context) {
	w.mu.Lock()
	ls := slices.Collect(maps.Values(w.watches))
	w.mu.Unlock()
	// A few transactions at a time: 10,000 keys one after the other would
	// leave the locks unwatched for 157 round trips.
	var failed atomic.Bool
	var wg sync.WaitGroup
	slots := make(chan struct{}, refreshParallel)
	for len(ls) > 0 && life.Err() == nil && !failed.Load() {
		batch := ls[:min(len(ls), refreshBatch)]
		ls = ls[len(batch):]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if !w.refreshBatch(life, batch) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
}

// refreshParallel is how many of refresh's transactions are in flight.
const refreshParallel = 8

// refreshBatch reads the keys of batch in one transaction (see refresh);
// false if the read failed.
func (w *keyWatcher) refreshBatch(life context.Context, batch []*Lock) bool {
	ops := make([]clientv3.Op, len(batch))
	for i, l := range batch {
		ops[i] = clientv3.OpGet(l.t.key, clientv3.WithKeysOnly())
	}
	ctx, cancel := context.WithTimeout(life, w.c.o.cleanupTimeout)
	resp, err := w.c.cli.Txn(ctx).Then(ops...).Commit()
	cancel()
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, l := range batch {
		if w.watches[l.watchID] != l {
			continue // removed meanwhile
		}
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 || kvs[0].CreateRevision != int64(l.token) {
			w.drop(l)
			w.spawn(l.deleted)
			continue
		}
		l.wrev = max(l.wrev, resp.Header.Revision+1)
	}
	return true
}

// errStreamRefused ends a stream whose auth token etcd no longer accepts, or
// whose answers make no sense, so that a new one (logged in afresh) replaces it.
var errStreamRefused = errors.New("etcdlock: watch stream refused")

// handle acts on one response read from the stream.
func (w *keyWatcher) handle(resp *pb.WatchResponse) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard = true
	switch {
	case resp.Created:
		if len(w.sent) == 0 {
			return errStreamRefused
		}
		id := w.sent[0]
		w.sent = w.sent[1:]
		l := w.watches[id]
		if !resp.Canceled && resp.WatchId != id {
			return errStreamRefused
		}
		if id == w.probeID {
			// Answered, refused or not, on the path events take: the
			// stream works. Its watches outlive its auth token, so a
			// refusal for the token is left to a lock's creation to find.
			w.probeID = 0
			if !resp.Canceled {
				w.push(cancelRequest(id))
			}
			return nil
		}
		if !resp.Canceled {
			return nil
		}
		reason := refusal(errors.New(resp.CancelReason))
		if tokenRefused(reason) || errors.Is(reason, rpctypes.ErrUserEmpty) {
			return errStreamRefused // the watch is created again on the next stream
		}
		if l != nil {
			w.forget(l) // etcd made no watch, so there is nothing to cancel
			w.spawn(l.recheck)
		}
	case resp.Canceled:
		// etcd ended the watch (compaction), or confirmed our cancel.
		if l := w.watches[resp.WatchId]; l != nil {
			w.drop(l)
			w.spawn(l.recheck)
		}
	default:
		l := w.watches[resp.WatchId]
		if l == nil {
			return nil
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				w.drop(l)
				w.spawn(l.deleted)
				break
			}
		}
	}
	return nil
}

// spawn runs f in a goroutine of its own, counted in c.wg; w.mu is held by
// the reader, which holds a count of c.wg itself.
func (w *keyWatcher) spawn(f func()) {
	w.c.wg.Add(1)
	go func() {
		defer w.c.wg.Done()
		f()
	}()
}

// watch starts watching l's key for deletion; it runs watchDelay after the
// acquisition, on a timer that holds a count of c.wg.
func (l *Lock) watch() {
	defer l.c.wg.Done()
	l.c.kw.add(l, int64(l.token)+1)
}

// deleted ends the lock after etcd reported its key deleted, with the
// cause (none: Unlock tells).
func (l *Lock) deleted() {
	if err := l.deletedCause(l.wctx); err != nil {
		l.finish(err)
	}
}

// recheck decides, after etcd ended the key's watch (compaction, a missing
// permission), whether the key is still there; if so the watch resumes
// from the revision it was read at, after a pause that doubles while
// watches end early, so that refused watches make no busy loop.
func (l *Lock) recheck() {
	ctx := l.wctx
	if time.Since(l.wsince) > maxWatchBackoff {
		l.wbackoff = minWatchBackoff
	}
	resp, err := l.c.cli.Get(ctx, l.t.key)
	switch {
	case ctx.Err() != nil:
		return // the lock ended, and whoever ended it said why
	case err != nil:
		l.finish(lost(fmt.Errorf("watch ended and the key could not be read: %w", err)))
		return
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != int64(l.token):
		l.deleted()
		return
	}
	if pause(ctx, l.s, &l.wbackoff) != nil {
		return
	}
	l.c.kw.add(l, resp.Header.Revision+1)
}
