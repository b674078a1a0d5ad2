// Package reqfault injects request-level faults into a gRPC client, such as
// the one inside an etcd *clientv3.Client, for tests. Where netproxy stalls
// whole connections, reqfault works on one request at a time, which is how a
// request can arrive late, twice, or lose its reply:
//
//   - [Late]: the request is held until the caller gives up (its context
//     ends), then delivered to the server anyway. The caller sees its
//     context's error; the server applies the request afterwards.
//   - [LostReply]: the request is applied, and the caller gets
//     codes.Unavailable instead of the reply.
//   - [Twice]: the request is applied and answered, and a copy of it is
//     delivered again a little later.
//
// Faults are drawn at random from a seeded source ([Injector.Random]) or
// forced on the next matching request ([Injector.Next], [Injector.Hold]).
// Streams (watches, keepalives) can be made to fail or hang
// ([Injector.HangStreams], [Injector.RefuseWatches]).
package reqfault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kind is a kind of request fault.
type Kind int

// The kinds of request fault.
const (
	None      Kind = iota
	Late           // delivered after the caller gave up
	LostReply      // applied, reply replaced by Unavailable
	Twice          // applied, answered, and delivered again later
)

// Kinds lists the fault kinds, for drawing and reporting.
var Kinds = []Kind{Late, LostReply, Twice}

func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case Late:
		return "late"
	case LostReply:
		return "lost-reply"
	case Twice:
		return "twice"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind returns the kind whose String is s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if k.String() == s {
			return k, nil
		}
	}
	return None, fmt.Errorf("reqfault: unknown kind %q", s)
}

// Any matches every request.
func Any(string, any) bool { return true }

// Match selects requests: method is the full gRPC method name
// ("/etcdserverpb.KV/Txn"), req the request message.
type Match func(method string, req any) bool

// Method matches requests whose method name ends with suffix ("KV/Txn").
func Method(suffix string) Match {
	return func(method string, _ any) bool { return strings.HasSuffix(method, suffix) }
}

// Injector holds the fault settings of one or more clients. Its methods are
// safe for concurrent use. Create one with [New], pass [Injector.DialOptions]
// to the client, and call [Injector.Close] after closing the client.
type Injector struct {
	wg     sync.WaitGroup
	closed chan struct{}

	mu      sync.Mutex
	rng     *rand.Rand
	rate    float64
	kinds   []Kind
	match   Match
	maxLate time.Duration
	forced  []*forced
	counts  map[Kind]int
	hang    Match
	refuse  Match
	before  []hook
	calls   map[string]int
	sent    map[string]int
	hung    int
	off     bool
}

type hook struct {
	match Match
	f     func(ctx context.Context, req any)
}

type forced struct {
	match Match
	kind  Kind
	held  *Held // Late requests released by the test
}

// New returns an injector with no faults enabled, whose random draws come
// from seed.
func New(seed uint64) *Injector {
	return &Injector{
		closed:  make(chan struct{}),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		counts:  map[Kind]int{},
		calls:   map[string]int{},
		sent:    map[string]int{},
		maxLate: 300 * time.Millisecond,
	}
}

// DialOptions returns the interceptors to add to the client's dial options
// (clientv3.Config.DialOptions).
func (in *Injector) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(in.unary),
		grpc.WithChainStreamInterceptor(in.stream),
	}
}

// Random gives each request matched by m (all when nil) a fault with
// probability rate, of a kind drawn evenly from kinds (all when none are
// given). Late deliveries and second copies go out up to maxLate after the
// caller gave up or was answered. Rate 0 stops random faults.
func (in *Injector) Random(rate float64, maxLate time.Duration, m Match, kinds ...Kind) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(kinds) == 0 {
		kinds = Kinds
	}
	in.rate, in.maxLate, in.match, in.kinds = rate, maxLate, m, kinds
}

// Next gives the next request matched by m fault k.
func (in *Injector) Next(m Match, k Kind) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.forced = append(in.forced, &forced{match: m, kind: k})
}

// Hold holds the next request matched by m as a [Late] fault: its caller
// sees its context end, and the request reaches the server only when the
// test calls [Held.Release].
func (in *Injector) Hold(m Match) *Held {
	h := &Held{caught: make(chan struct{}), release: make(chan struct{}), delivered: make(chan error, 1)}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.forced = append(in.forced, &forced{match: m, kind: Late, held: h})
	return h
}

// Before calls f with each request matched by m just before it is sent,
// until Heal: a test's way to change the server's state at an exact point.
func (in *Injector) Before(m Match, f func(req any)) {
	in.BeforeContext(m, func(_ context.Context, req any) { f(req) })
}

// BeforeContext is [Injector.Before] with the request's context, so that f
// can wait for the caller to give up (a request whose reply the caller
// stopped waiting for) or apply the request itself first (one that landed
// without its reply reaching the caller).
func (in *Injector) BeforeContext(m Match, f func(ctx context.Context, req any)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.before = append(in.before, hook{m, f})
}

// HangStreams makes every stream matched by m (nil: none), open or new,
// deliver no message until its context ends, as a stream on a connection
// that hangs. A stream hung once stays hung.
func (in *Injector) HangStreams(m Match) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.hang = m
}

// RefuseWatches makes the server's answer to every new watch matched by m
// (nil: none) a cancellation, as etcd answers a watch it refuses (an expired
// auth token, a compacted revision).
func (in *Injector) RefuseWatches(m Match) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.refuse = m
}

// Heal stops all faults: random ones, forced ones not yet used, hung and
// refused streams. Held requests stay held until released.
func (in *Injector) Heal() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rate, in.forced, in.hang, in.refuse, in.before = 0, nil, nil, nil, nil
}

// Counts returns how many faults of each kind were injected.
func (in *Injector) Counts() map[Kind]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[Kind]int, len(in.counts))
	for k, n := range in.counts {
		out[k] = n
	}
	return out
}

// Calls returns how many requests and streams whose method name ends with
// suffix the client started.
func (in *Injector) Calls(suffix string) int { return in.count(in.calls, suffix) }

// Sent returns how many messages the client sent on streams whose method
// name ends with suffix (a watch stream's creates and cancels, a keepalive
// stream's keepalives).
func (in *Injector) Sent(suffix string) int { return in.count(in.sent, suffix) }

func (in *Injector) count(by map[string]int, suffix string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for m, c := range by {
		if strings.HasSuffix(m, suffix) {
			n += c
		}
	}
	return n
}

// Hung returns how many streams HangStreams has hung.
func (in *Injector) Hung() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.hung
}

// Close stops all faults, delivers nothing more and waits for requests
// being delivered late to finish (each bounded by a few seconds).
func (in *Injector) Close() {
	in.mu.Lock()
	if !in.off {
		in.off = true
		close(in.closed)
	}
	in.rate, in.forced, in.hang, in.refuse, in.before = 0, nil, nil, nil, nil
	in.mu.Unlock()
	in.wg.Wait()
}

// Held is a request held by [Injector.Hold].
type Held struct {
	once      sync.Once
	caught    chan struct{}
	release   chan struct{}
	delivered chan error
}

// Caught is closed once the held request has been caught.
func (h *Held) Caught() <-chan struct{} { return h.caught }

// Release delivers the held request to the server and returns the error it
// got (nil if the server applied it), or ctx's error.
func (h *Held) Release(ctx context.Context) error {
	h.once.Do(func() { close(h.release) })
	select {
	case err := <-h.delivered:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (in *Injector) runHooks(ctx context.Context, method string, req any) {
	in.mu.Lock()
	in.calls[method]++
	var fs []func(context.Context, any)
	for _, h := range in.before {
		if h.match(method, req) {
			fs = append(fs, h.f)
		}
	}
	in.mu.Unlock()
	for _, f := range fs {
		f(ctx, req)
	}
}

// pick returns the fault for one request.
func (in *Injector) pick(method string, req any) (Kind, *Held, time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.off {
		return None, nil, 0
	}
	for i, f := range in.forced {
		if f.match(method, req) {
			in.forced = append(in.forced[:i:i], in.forced[i+1:]...)
			in.counts[f.kind]++
			return f.kind, f.held, 0
		}
	}
	if in.rate <= 0 || (in.match != nil && !in.match(method, req)) || in.rng.Float64() >= in.rate {
		return None, nil, 0
	}
	k := in.kinds[in.rng.IntN(len(in.kinds))]
	in.counts[k]++
	return k, nil, time.Duration(in.rng.Int64N(int64(in.maxLate) + 1))
}

func (in *Injector) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	in.runHooks(ctx, method, req)
	kind, held, extra := in.pick(method, req)
	switch kind {
	case Late:
		return in.late(ctx, method, req, reply, cc, invoker, held, extra, opts)
	case LostReply:
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "reqfault: reply lost")
	case Twice:
		err := invoker(ctx, method, req, reply, cc, opts...)
		in.deliver(ctx, method, req, reply, cc, invoker, nil, extra, nil, opts)
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// late holds a request until the caller gives up (or, when held, until the
// test releases it), then delivers it. A caller that can never give up
// would wait forever, so its request is only delayed.
func (in *Injector) late(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, held *Held, extra time.Duration, opts []grpc.CallOption) error {
	if held == nil && ctx.Done() == nil {
		if !in.sleep(extra) {
			return status.Error(codes.Canceled, "reqfault: closed")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	after := ctx.Done()
	var result func(error)
	if held != nil {
		close(held.caught)
		after = held.release
		result = func(err error) { held.delivered <- err }
	}
	in.deliver(ctx, method, req, reply, cc, invoker, after, extra, result, opts)
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// deliver sends a copy of the request in the background once after is
// closed (at once when nil) and extra has passed, and passes the server's
// answer to result (if not nil); after Close, nothing. Its reply goes to a fresh message, never
// the caller's.
func (in *Injector) deliver(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, after <-chan struct{}, extra time.Duration, result func(error), opts []grpc.CallOption) {
	// Counted under mu, and never once Close began: an Add racing with
	// Close's Wait is a misuse of the WaitGroup (the race detector caught
	// one, from a request sent just as a test closed the injector).
	in.mu.Lock()
	if in.off {
		in.mu.Unlock()
		return
	}
	in.wg.Add(1)
	in.mu.Unlock()
	go func() {
		defer in.wg.Done()
		if after != nil {
			select {
			case <-after:
			case <-in.closed:
				return
			}
		}
		if !in.sleep(extra) {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		fresh := reflect.New(reflect.TypeOf(reply).Elem()).Interface()
		err := invoker(dctx, method, req, fresh, cc, own(opts)...)
		if result != nil {
			result(err)
		}
	}()
}

// own drops the call options that write into the caller's memory (the
// peer, headers and trailers of the call): a copy delivered after the caller
// returned must not write what the caller (etcd's retry interceptor logs
// the peer) may be reading.
func own(opts []grpc.CallOption) []grpc.CallOption {
	var out []grpc.CallOption
	for _, o := range opts {
		switch o.(type) {
		case grpc.PeerCallOption, *grpc.PeerCallOption, grpc.HeaderCallOption, *grpc.HeaderCallOption,
			grpc.TrailerCallOption, *grpc.TrailerCallOption:
			continue
		}
		out = append(out, o)
	}
	return out
}

// sleep waits d, or returns false if the injector is closed first.
func (in *Injector) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-in.closed:
		return false
	}
}
