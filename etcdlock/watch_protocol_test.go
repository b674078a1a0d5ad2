package etcdlock

import (
	"context"
	"io"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Unit tests of the watch stream's protocol (see watcher) against a fake
// stream: what the watcher sends, and what it does with each answer. The
// integration tests (keywatch_test.go, hungwatch_test.go, and the tests of
// locks, waiters and Observe) run the same code against etcd.

// fakeStream is a Watch stream whose requests the test reads from sent and
// whose answers it writes to recv; closing recv ends it as a failure.
type fakeStream struct {
	grpc.ClientStream
	ctx  context.Context
	sent chan *pb.WatchRequest
	recv chan *pb.WatchResponse
}

func (f *fakeStream) Send(r *pb.WatchRequest) error {
	select {
	case f.sent <- r:
		return nil
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
}

func (f *fakeStream) Recv() (*pb.WatchResponse, error) {
	select {
	case r, ok := <-f.recv:
		if !ok {
			return nil, io.EOF
		}
		return r, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

// protocol is a watcher whose streams are fake: each one opened is sent on
// streams.
type protocol struct {
	t       *testing.T
	e       *watcher
	streams chan *fakeStream
}

func newProtocol(t *testing.T) *protocol {
	life, stop := context.WithCancel(context.Background())
	c := &Client{o: defaultOptions(), life: life, stop: stop}
	c.o.ttl = time.Hour // no probe unless a test sends one
	c.o.cleanupTimeout = 50 * time.Millisecond
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	c.cli = cli
	p := &protocol{t: t, e: newWatcher(c), streams: make(chan *fakeStream, 4)}
	c.watches = p.e
	p.e.open = func(ctx context.Context) (pb.Watch_WatchClient, error) {
		f := &fakeStream{ctx: ctx, sent: make(chan *pb.WatchRequest, 100), recv: make(chan *pb.WatchResponse, 100)}
		p.streams <- f
		return f, nil
	}
	t.Cleanup(func() { stop(); c.wg.Wait(); cli.Close() })
	return p
}

// box adds a deletions-only watch of key (or, if all, of every event under
// it) and returns its box.
func (p *protocol) box(key string, all bool) *watchBox {
	b := newWatchBox(watch{key: key, all: all})
	p.e.c.wg.Add(1)
	defer p.e.c.wg.Done()
	p.e.add(context.Background(), &b.ws[0], 0)
	return b
}

func (p *protocol) stream() *fakeStream {
	p.t.Helper()
	select {
	case f := <-p.streams:
		return f
	case <-time.After(5 * time.Second):
		p.t.Fatal("no stream opened")
		return nil
	}
}

func (p *protocol) next(f *fakeStream) *pb.WatchRequest {
	p.t.Helper()
	select {
	case r := <-f.sent:
		return r
	case <-time.After(5 * time.Second):
		p.t.Fatal("nothing sent")
		return nil
	}
}

// news waits until b was told something, and returns it.
func (p *protocol) news(b *watchBox) watchNews {
	p.t.Helper()
	select {
	case <-b.note:
		return b.take()
	case <-time.After(5 * time.Second):
		p.t.Fatal("the watch was told nothing")
		return watchNews{}
	}
}

func created(id int64) *pb.WatchResponse {
	return &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 7}, WatchId: id, Created: true}
}

func TestWatchProtocolCreationsInOrder(t *testing.T) {
	p := newProtocol(t)
	a, b, c := p.box("a", false), p.box("b", false), p.box("c", true)
	f := p.stream()
	var ids []int64
	for _, key := range []string{"a", "b", "c"} {
		cr := p.next(f).GetCreateRequest()
		if cr == nil || string(cr.Key) != key || cr.WatchId == 0 || cr.StartRevision != 0 {
			t.Fatalf("creation of %q: got %+v", key, cr)
		}
		ids = append(ids, cr.WatchId)
	}
	if cr := a.ws[0]; len(ids) != 3 || ids[0] >= ids[1] || ids[1] >= ids[2] || cr.id != ids[0] {
		t.Fatalf("watch IDs %v, not in order", ids)
	}
	// The second is refused (etcd answers with no ID, and a reason).
	f.recv <- created(ids[0])
	f.recv <- &pb.WatchResponse{Created: true, Canceled: true, WatchId: -1, CancelReason: rpctypes.ErrGRPCPermissionDenied.Error()}
	f.recv <- created(ids[2])
	if n := p.news(a); n.created == 0 || n.ended {
		t.Errorf("first: got %+v, want created", n)
	}
	if n := p.news(b); !n.ended || n.deleted || !permanent(n.reason) {
		t.Errorf("refused: got %+v, want ended with the permission refusal", n)
	}
	if n := p.news(c); n.created == 0 {
		t.Errorf("third: got %+v, want created", n)
	}
	// Events: a deletion ends a deletions-only watch; a watch of every
	// event gets them all, in order.
	f.recv <- &pb.WatchResponse{WatchId: ids[0], Events: []*mvccpb.Event{{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a")}}}}
	evs := []*mvccpb.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{ModRevision: 8}}, {Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{ModRevision: 9}}}
	f.recv <- &pb.WatchResponse{WatchId: ids[2], Events: evs}
	if n := p.news(a); !n.ended || !n.deleted {
		t.Errorf("first after its deletion: got %+v, want ended, deleted", n)
	}
	if cr := p.next(f).GetCancelRequest(); cr == nil || cr.WatchId != ids[0] {
		t.Errorf("after the deletion: got %v, want the watch cancelled on etcd's side", cr)
	}
	if n := p.news(c); len(n.events) != 2 || n.events[0].Kv.ModRevision != 8 || n.events[1].Kv.ModRevision != 9 || n.ended {
		t.Errorf("third: got %+v, want both events in order", n)
	}
}

func TestWatchProtocolRemove(t *testing.T) {
	p := newProtocol(t)
	a := p.box("a", false)
	f := p.stream()
	id := p.next(f).GetCreateRequest().WatchId
	p.e.remove(&a.ws[0])
	if cr := p.next(f).GetCancelRequest(); cr == nil || cr.WatchId != id {
		t.Fatalf("remove after the creation was sent: got %v, want a cancel of %d", cr, id)
	}
	// A watch removed before its creation was sent is never created: queue
	// two while holding the mutex (the writer cannot take them), and
	// remove the first before letting go.
	b, c := newWatchBox(watch{key: "b"}), newWatchBox(watch{key: "c"})
	p.e.mu.Lock()
	for _, w := range []*watch{&b.ws[0], &c.ws[0]} {
		p.e.nextID++
		w.id = p.e.nextID
		p.e.watches[w.id] = w
		p.e.cur.push(createRequest(w))
	}
	p.e.drop(&b.ws[0])
	p.e.mu.Unlock()
	if cr := p.next(f).GetCreateRequest(); cr == nil || string(cr.Key) != "c" {
		t.Fatalf("got %v, want the creation of c alone (b removed before it was sent)", cr)
	}
	select {
	case r := <-f.sent:
		t.Fatalf("then %v, want nothing", r)
	default:
	}
}

func TestWatchProtocolMismatchedAnswerEndsStream(t *testing.T) {
	p := newProtocol(t)
	a := p.box("a", false)
	f := p.stream()
	id := p.next(f).GetCreateRequest().WatchId
	f.recv <- created(id + 5)
	if n := p.news(a); !n.ended || n.deleted {
		t.Fatalf("after an answer for another watch: got %+v, want the watch ended with the stream", n)
	}
	p.stream() // a new one
}

// A stream that ends mid-batch: the waiters' and observers' watches are
// ended (their owners read afresh), a held lock's is carried to the next
// stream, from where it was.
func TestWatchProtocolStreamEndsMidBatch(t *testing.T) {
	p := newProtocol(t)
	b := p.box("waiter", false)
	lw := &watch{key: "held", token: 3, sink: nopSink{}}
	p.e.c.wg.Add(1)
	p.e.add(context.Background(), lw, 4)
	p.e.c.wg.Done()
	f := p.stream()
	idB := p.next(f).GetCreateRequest().WatchId
	p.next(f)
	f.recv <- created(idB)
	if n := p.news(b); n.created == 0 {
		t.Fatalf("got %+v, want created", n)
	}
	close(f.recv)
	if n := p.news(b); !n.ended || n.deleted || n.reason != nil {
		t.Fatalf("after the stream ended: got %+v, want ended with no reason", n)
	}
	// The lock's watch is refreshed before the next stream; refresh's read
	// fails (the etcd client reaches no server), which leaves it as it was.
	f2 := p.stream()
	cr := p.next(f2).GetCreateRequest()
	if cr == nil || string(cr.Key) != "held" || cr.StartRevision != 4 {
		t.Fatalf("on the next stream: got %v, want the held lock's watch from revision 4", cr)
	}
}

// A probe unanswered at the next tick, with nothing heard meanwhile, finds
// the stream hung; anything heard, or an answer, keeps it.
func TestWatchProtocolProbe(t *testing.T) {
	p := newProtocol(t)
	p.box("a", false)
	f := p.stream()
	p.next(f)
	p.e.mu.Lock()
	s := p.e.cur
	p.e.mu.Unlock()
	if !p.e.probe(s) {
		t.Fatal("first tick: hung, want a probe sent")
	}
	probe := p.next(f).GetCreateRequest()
	if probe == nil || len(probe.Filters) != 2 {
		t.Fatalf("got %v, want a probe for no events", probe)
	}
	if p.e.probe(s) {
		t.Fatal("second tick, probe unanswered and nothing heard: not hung, want hung")
	}
	// Heard from since: not hung, even with the probe still unanswered.
	if err := p.e.handle(s, &pb.WatchResponse{WatchId: -1, Header: &pb.ResponseHeader{Revision: 9}}); err != nil {
		t.Fatal(err)
	}
	if !p.e.probe(s) {
		t.Fatal("a tick after something was heard: hung, want not")
	}
	// The probe answered (after the creation before it): a new probe at
	// the next tick.
	id := probe.WatchId
	for _, r := range []*pb.WatchResponse{created(id - 1), created(id)} {
		if err := p.e.handle(s, r); err != nil {
			t.Fatal(err)
		}
	}
	if cr := p.next(f).GetCancelRequest(); cr == nil || cr.WatchId != id {
		t.Fatalf("after the probe's answer: got %v, want it cancelled", cr)
	}
	if !p.e.probe(s) || p.next(f).GetCreateRequest() == nil {
		t.Fatal("next tick: want a new probe")
	}
}

type nopSink struct{}

func (nopSink) watchCreated(int64)          {}
func (nopSink) watchEvents([]*mvccpb.Event) {}
func (nopSink) watchEnded(bool, error)      {}

// An open that hangs (the connection died as the stream opened) is given
// up after openTimeout: a watch added meanwhile is reported ended, so its
// owner reads afresh and says so, and the next stream is opened; a held
// lock's watch is carried over to it, not ended. Without the timeout the
// watch waited, unreported, until gRPC gave up connecting.
func TestWatchProtocolHungOpen(t *testing.T) {
	testenv.Long(t, "waits out a stream's 5 s open timeout")
	t.Parallel() // a fake stream: it shares nothing, and only waits
	p := newProtocol(t)
	p.e.c.o.ttl = 3 * time.Second // openTimeout: its 5 s floor
	opens := make(chan struct{}, 4)
	p.e.open = func(ctx context.Context) (pb.Watch_WatchClient, error) {
		opens <- struct{}{}
		<-ctx.Done() // never opens
		return nil, ctx.Err()
	}
	start := time.Now()
	held := &watch{key: "held", token: 5, sink: nopSink{}}
	p.e.c.wg.Add(1)
	p.e.add(context.Background(), held, 6)
	p.e.c.wg.Done()
	b := p.box("a", true)
	select {
	case <-opens:
	case <-time.After(5 * time.Second):
		t.Fatal("no open tried")
	}
	select {
	case <-b.note:
		if n := b.take(); !n.ended {
			t.Fatalf("the watch was told %+v, want ended", n)
		}
	case <-time.After(p.e.openTimeout() + 5*time.Second):
		t.Fatalf("the watch was told nothing %v after the open began", p.e.openTimeout()+5*time.Second)
	}
	if d := time.Since(start); d < p.e.openTimeout() {
		t.Fatalf("the watch ended after %v, before the open's timeout (%v)", d, p.e.openTimeout())
	}
	p.e.mu.Lock()
	kept := p.e.watches[held.id] == held
	p.e.mu.Unlock()
	if !kept {
		t.Fatal("the held lock's watch was dropped with the stream that never opened")
	}
	select {
	case <-opens: // tried again
	case <-time.After(5 * time.Second):
		t.Fatal("no second open")
	}
}
