package etcdlock

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// watcher is the Client's one watch engine: every watch the Client makes
// (a held lock's key, a waiter's predecessor, an observed election's
// queue) goes on one Watch stream that it opens, writes and reads itself.
//
// clientv3 runs a goroutine with its own channels and buffers for each
// watch (about 9 KB per held lock, see BENCHMARKS.md "Scale") and creates
// the watches of a stream one at a time. Here a watch costs a map entry,
// and creations are pipelined: each carries a watch ID chosen here, and
// etcd answers a stream's creations in the order they were sent (a refused
// one with no ID), holding back a watch's events until its creation is
// answered. One goroutine reads the stream and one writes it, so that
// nobody who adds or removes a watch waits for the network.
//
// A watch that etcd ends (compaction, a refusal) is reported to its owner,
// which reads afresh and watches again. When the stream ends (no leader, a
// member gone, an auth token etcd no longer accepts, a hang), the watches
// of held locks are carried over: the reader reads their keys (refresh)
// and the next stream creates them again from the revision read, or, if
// the read failed, from where they were, so a deletion in between is still
// reported. Every other watch is reported ended, and its owner reads
// afresh (a waiter its predecessor, an observer the queue) and watches
// again.
//
// A stream can also hang: the connection works (keepalives, on a stream of
// their own, are acknowledged) but the watch stream delivers nothing. While
// it carries watches, a third goroutine (not the writer, which blocks in
// Send once etcd stops reading a hung stream) probes it every third of the
// lease TTL with a watch creation, which etcd answers on the same path as
// it sends events, whether or not the watches are in sync; a probe
// unanswered at the next tick, with nothing else heard from the stream
// meanwhile, ends it, as a failure would.
type watcher struct {
	c    *Client
	open func(context.Context) (pb.Watch_WatchClient, error) // opens a stream; a fake in the protocol's unit tests

	mu      sync.Mutex       // guards the fields below
	watches map[int64]*watch // by watch ID
	nextID  int64
	running bool     // the reader's goroutine runs
	cur     *wstream // the current stream; nil while there is none
}

// watch is one watch on the Client's stream: what it watches, set before
// it is added and read-only after, and its place on the stream, guarded by
// the watcher's mutex.
type watch struct {
	key, end string // one key, or the range [key, end)
	all      bool   // every event (Observe); else deletions only, and the first ends the watch
	token    int64  // a held lock's key's create revision: its watch outlives streams
	sink     watchSink

	id    int64     // 0 while not watched
	rev   int64     // the revision to start from; 0: the current one
	since time.Time // when it was added
}

// watchSink is told what happens to a watch. Its methods are called with
// the watcher's mutex held, by the goroutine reading the stream: they must
// not block or call the watcher.
type watchSink interface {
	// watchCreated: the watch is in place from revision rev on.
	watchCreated(rev int64)
	// watchEvents: events of a watch of every event, in revision order.
	watchEvents(evs []*mvccpb.Event)
	// watchEnded: the watch is over, forgotten by the watcher: a deletion
	// ended it (deleted), or etcd or the stream did (reason is etcd's, if
	// it gave one); the owner reads afresh.
	watchEnded(deleted bool, reason error)
}

// wstream is one Watch stream and what was sent on it, replaced as a whole
// when the stream is; guarded by the watcher's mutex.
type wstream struct {
	pb.Watch_WatchClient
	cancel  context.CancelFunc // ends the stream
	queue   []*pb.WatchRequest // for the writer to send
	wake    chan struct{}      // the queue has grown (buffer 1); one per stream, so an old writer cannot take it
	sent    []int64            // creations sent, unanswered, in order
	sentMax int64              // highest watch ID whose creation was sent
	probeID int64              // the last probe's watch ID, 0 once answered
	heard   bool               // the stream delivered something since the watchdog's last tick
}

func newWatcher(c *Client) *watcher {
	open := func(ctx context.Context) (pb.Watch_WatchClient, error) {
		return pb.NewWatchClient(c.cli.ActiveConnection()).Watch(ctx, grpc.WaitForReady(true))
	}
	return &watcher{c: c, open: open, watches: make(map[int64]*watch)}
}

// remove stops w, if it is watched.
func (e *watcher) remove(w *watch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drop(w)
}

// drop forgets w and cancels it on etcd's side if its creation was sent;
// e.mu is held.
func (e *watcher) drop(w *watch) {
	id := w.id
	if id == 0 {
		return
	}
	e.forget(w)
	if e.cur != nil && id <= e.cur.sentMax {
		e.cur.push(cancelRequest(id))
	}
}

// forget forgets w here only; e.mu is held.
func (e *watcher) forget(w *watch) {
	delete(e.watches, w.id)
	w.id = 0
}

// end forgets w and tells its owner; e.mu is held.
func (e *watcher) end(w *watch, deleted bool, reason error) {
	e.drop(w)
	w.sink.watchEnded(deleted, reason)
}

func cancelRequest(id int64) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
		CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
}

// push queues req for the writer.
func (s *wstream) push(req *pb.WatchRequest) {
	s.queue = append(s.queue, req)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func createRequest(w *watch) *pb.WatchRequest {
	cr := &pb.WatchCreateRequest{Key: []byte(w.key), StartRevision: w.rev, WatchId: w.id, Filters: deletesOnly}
	if w.end != "" {
		cr.RangeEnd = []byte(w.end)
	}
	if w.all {
		cr.Filters = nil
	}
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}
}

// The filters of a deletions-only watch and of a probe (nothing). Shared:
// requests are only read, when they are marshalled.
var (
	deletesOnly = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
	noEvents    = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT, pb.WatchCreateRequest_NODELETE}
)

// refusal returns etcd's reason for refusing or ending a watch as the error
// it stands for (nil for none). etcd sends it as text, which errors.Is does
// not match.
func refusal(reason error) error {
	if reason == nil || reason.Error() == "" {
		return nil
	}
	for _, e := range []error{rpctypes.ErrGRPCInvalidAuthToken, rpctypes.ErrGRPCAuthOldRevision,
		rpctypes.ErrGRPCUserEmpty, rpctypes.ErrGRPCPermissionDenied} {
		if reason.Error() == e.Error() {
			return rpctypes.Error(e)
		}
	}
	return reason
}
