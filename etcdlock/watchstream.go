package etcdlock

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The watcher's stream: adding watches to it, opening it, writing, reading
// and probing it (see watcher).

// add starts w, from revision rev, unless ctx (its owner's) has ended: an
// owner that ended removed it, or will not. The caller holds a count of
// c.wg.
func (e *watcher) add(ctx context.Context, w *watch, rev int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	e.nextID++
	w.id, w.rev, w.since = e.nextID, rev, time.Now()
	e.watches[w.id] = w
	if e.cur != nil {
		e.cur.push(createRequest(w))
	}
	if !e.running {
		e.running = true
		e.c.wg.Add(1)
		go e.keepOpen()
	}
}

// keepOpen keeps a stream open and reads it until the Client is closed,
// pausing before each new stream as waiters do, so that refused streams
// make no busy loop.
func (e *watcher) keepOpen() {
	defer e.c.wg.Done()
	backoff := watchBackoff()
	life := e.c.life
	for life.Err() == nil {
		start := time.Now()
		e.serve(life)
		backoff.resetIfLasted(start)
		backoff.wait(life, nil)
	}
	e.mu.Lock()
	e.running = false
	e.mu.Unlock()
}

// serve opens a stream, creates every watch on it and reads it until it
// fails. etcd closes a stream opened WithRequireLeader when its member
// loses the leader, so that the next one goes to a member that has one.
func (e *watcher) serve(life context.Context) {
	e.refresh(life)
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(life))
	defer cancel()
	// An open that hangs (the connection died as the stream opened, and
	// gRPC waits to connect again) is given up as a hung stream is, or the
	// watches added meanwhile would wait for it unreported.
	hung := time.AfterFunc(e.openTimeout(), cancel)
	stream, err := e.open(ctx)
	if !hung.Stop() && err == nil {
		err = errOpenHung // it fired as the open returned: the stream is being cancelled
	}
	if err != nil {
		e.endStream(nil)
		return
	}
	s := &wstream{Watch_WatchClient: stream, cancel: cancel, wake: make(chan struct{}, 1)}
	e.mu.Lock()
	e.cur = s
	for _, id := range slices.Sorted(maps.Keys(e.watches)) { // in ID order, so sentMax tells what was sent
		s.push(createRequest(e.watches[id]))
	}
	e.mu.Unlock()
	defer e.endStream(s)

	e.c.wg.Add(2)
	go func() {
		defer e.c.wg.Done()
		defer s.cancel() // a failed send ends the stream
		e.write(ctx, s)
	}()
	go func() {
		defer e.c.wg.Done()
		defer s.cancel() // so does an unanswered probe
		e.watchdog(ctx, s)
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		if err := e.handle(s, resp); err != nil {
			return
		}
	}
}

// endStream forgets s (nil: the stream that could not be opened) and ends
// every watch that does not outlive it.
func (e *watcher) endStream(s *wstream) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == s {
		e.cur = nil
	}
	for _, w := range e.watches {
		if w.token == 0 {
			e.forget(w)
			w.sink.watchEnded(false, nil)
		}
	}
}

// write sends the queued requests on s until ctx ends or a send fails.
func (e *watcher) write(ctx context.Context, s *wstream) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for {
			req, ok := e.next(s)
			if !ok {
				break
			}
			if err := s.Send(req); err != nil {
				return
			}
		}
	}
}

// next takes the next request to send on s off its queue, skipping the
// creations of watches removed before they were sent.
func (e *watcher) next(s *wstream) (*pb.WatchRequest, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.cur == s && len(s.queue) > 0 {
		req := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		cr := req.GetCreateRequest()
		if cr == nil {
			return req, true
		}
		if _, ok := e.watches[cr.WatchId]; ok || cr.WatchId == s.probeID {
			s.sent = append(s.sent, cr.WatchId)
			s.sentMax = cr.WatchId
			return req, true
		}
	}
	return nil, false
}

// watchdog probes s (see watcher) while it carries watches, until ctx ends
// or s is found hung (see probe). It is not the writer: a hung stream stops
// being read on etcd's side once its answers back up, and the writer then
// blocks in Send.
func (e *watcher) watchdog(ctx context.Context, s *wstream) {
	probe := time.NewTicker(e.probeInterval())
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-probe.C:
			if !e.probe(s) {
				return // the probe unanswered, nothing heard since the last tick: the stream hangs
			}
		}
	}
}

// minProbeInterval bounds how often a stream is probed with a short TTL.
const minProbeInterval = 500 * time.Millisecond

// probeInterval is how often the watchdog probes a stream.
func (e *watcher) probeInterval() time.Duration { return max(e.c.o.ttl/3, minProbeInterval) }

// openTimeout bounds the opening of a stream: two probe intervals, as long
// as a hung stream goes unnoticed, and 5 s at least, since an open with a
// user and password first authenticates (a bcrypt check and a raft
// proposal), which a loaded cluster may take seconds to do.
func (e *watcher) openTimeout() time.Duration { return max(2*e.probeInterval(), 5*time.Second) }

// errOpenHung is a stream's open given up after openTimeout.
var errOpenHung = errors.New("etcdlock: the watch stream did not open in time")

// probe queues a probe of s if it carries watches; it reports false if the
// last probe is still unanswered and s delivered nothing since the last
// tick. A probe queued behind thousands of creations (a new stream, a slow
// link) is answered after them: while their answers come, the stream
// works. A probe is a watch of the prefix key itself, which the role that
// may lock may read, from the current revision, for no events, cancelled
// once created.
func (e *watcher) probe(s *wstream) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur != s {
		return true
	}
	heard := s.heard
	s.heard = false
	if s.probeID != 0 {
		return heard
	}
	if len(e.watches) == 0 {
		return true
	}
	e.nextID++
	s.probeID = e.nextID
	s.push(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key:     []byte(e.c.o.prefix),
		WatchId: s.probeID,
		Filters: noEvents,
	}}})
	return true
}

// errStreamRefused ends a stream whose auth token etcd no longer accepts, or
// whose answers make no sense, so that a new one (logged in afresh) replaces it.
var errStreamRefused = errors.New("etcdlock: watch stream refused")

// handle acts on one response read from s.
func (e *watcher) handle(s *wstream, resp *pb.WatchResponse) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s.heard = true
	switch {
	case resp.Created:
		return e.created(s, resp)
	case resp.Canceled:
		// etcd ended the watch (compaction), or confirmed our cancel.
		if w := e.watches[resp.WatchId]; w != nil {
			e.end(w, false, refusal(errors.New(resp.CancelReason)))
		}
	default:
		w := e.watches[resp.WatchId]
		if w == nil || len(resp.Events) == 0 {
			return nil
		}
		if w.all {
			w.sink.watchEvents(resp.Events)
			return nil
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				e.end(w, true, nil)
				break
			}
		}
	}
	return nil
}

// created acts on etcd's answer to the oldest creation sent on s; e.mu is
// held.
func (e *watcher) created(s *wstream, resp *pb.WatchResponse) error {
	if len(s.sent) == 0 {
		return errStreamRefused
	}
	id := s.sent[0]
	s.sent = s.sent[1:]
	if !resp.Canceled && resp.WatchId != id {
		return errStreamRefused
	}
	if id == s.probeID {
		// Answered, refused or not, on the path events take: the stream
		// works. Its watches outlive its auth token, so a refusal for the
		// token is left to a watch's creation to find.
		s.probeID = 0
		if !resp.Canceled {
			s.push(cancelRequest(id))
		}
		return nil
	}
	w := e.watches[id]
	if !resp.Canceled {
		if w != nil {
			w.sink.watchCreated(resp.Header.GetRevision())
		}
		return nil
	}
	reason := refusal(errors.New(resp.CancelReason))
	if tokenRefused(reason) || errors.Is(reason, rpctypes.ErrUserEmpty) {
		return errStreamRefused // the watch is created again, or ended, with the stream
	}
	if w != nil {
		e.forget(w) // etcd made no watch, so there is nothing to cancel
		w.sink.watchEnded(false, reason)
	}
	return nil
}
