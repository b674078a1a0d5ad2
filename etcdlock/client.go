package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Client takes locks on etcd. All locks taken through one Client share one
// session: one lease, kept alive by the Client, created on first use and
// replaced by a new one when it is lost.
//
// The caller owns the *clientv3.Client (endpoints, TLS, auth) and must keep it
// open until Close returns. A Client is safe for concurrent use; create one
// with [New].
type Client struct {
	cli     *clientv3.Client
	o       options
	tel     *telemetry     // the kinds' and the read side's metrics and logger
	obs     engineObserver // told of the engine's work: tel
	wg      sync.WaitGroup // key watches and background work
	watches *watcher       // the Client's one watch stream

	granting chan struct{}   // one session grant at a time
	life     context.Context // ended by Close: ends observers and Run's loops
	stop     context.CancelFunc

	mu     sync.Mutex // guards sess and closed
	sess   *session   // nil before the first acquisition, and once current found it ended
	closed bool       // Close has begun

	closeDone chan struct{} // closed when the first Close has finished
	closeErr  error         // its result, which every Close returns; set before closeDone closes
}

// New returns a Client that takes locks through cli. It fails on a nil cli or
// an invalid option. It does no I/O: the session is created by the first
// acquisition (Lock, TryLock, RLock, TryRLock, Do, LockAll, a Semaphore's
// Acquire or TryAcquire, Campaign; Run campaigns); the Inspect, Break and
// List calls, Leader and Observe need none.
func New(cli *clientv3.Client, opts ...Option) (*Client, error) {
	if nilcheck.IsNil(cli) {
		return nil, fmt.Errorf("%w: New: nil etcd client", ErrInvalidArgument)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	tel, err := newTelemetry(&o)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: New: creating instruments: %w", err)
	}
	life, stop := context.WithCancel(context.Background())
	c := &Client{cli: cli, o: o, tel: tel, obs: tel, granting: make(chan struct{}, 1), life: life, stop: stop, closeDone: make(chan struct{})}
	c.watches = newWatcher(c)
	return c, nil
}

// session returns the live session, creating one if there is none.
// Creation is bounded by ctx, and so is waiting for another caller's
// creation: one slow grant holds up no one past their own deadline. Close
// ends both (ErrClosed), so that Run and Campaign do not outlive Close
// while etcd is unreachable.
func (c *Client) session(ctx context.Context) (*session, error) {
	if s, err := c.current(); s != nil || err != nil {
		return s, err
	}
	select {
	case c.granting <- struct{}{}:
		defer func() { <-c.granting }()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.life.Done():
		return nil, ErrClosed
	}
	if s, err := c.current(); s != nil || err != nil {
		return s, err // another caller made it meanwhile
	}
	s, err := c.grant(ctx)
	if err != nil && ctx.Err() == nil && c.life.Err() != nil {
		return nil, ErrClosed
	}
	return s, err
}

// checkCall refuses, naming op, a call on a nil or zero Client (one not
// made by New) and a nil context.
func (c *Client) checkCall(ctx context.Context, op string) error {
	return checkCall(ctx, c == nil || c.cli == nil, "Client", op)
}

// checkCall refuses, naming op, a call on a nil or zero value of the type
// named what (one not made by this package) and a nil context: a caller's
// bug, never a panic.
func checkCall(ctx context.Context, zero bool, what, op string) error {
	switch {
	case zero:
		return fmt.Errorf("%w: %s on a nil or zero %s", ErrInvalidArgument, op, what)
	case ctx == nil:
		return fmt.Errorf("%w: %s: nil context", ErrInvalidArgument, op)
	}
	return nil
}

// current returns the live session, or nil if a new one is needed, having
// stopped the old one. The old one is stopped outside c.mu: ending a
// session closes, counts and logs each of its locks, which with thousands
// held would stall every other call on the Client. Close waits for it
// (c.wg).
func (c *Client) current() (*session, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.sess == nil {
		c.mu.Unlock()
		return nil, nil
	}
	err := c.sess.check()
	if err == nil {
		s := c.sess
		c.mu.Unlock()
		return s, nil
	}
	old := c.sess
	c.sess = nil
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	old.close(context.Background(), err, false) // no I/O: the revoke follows in the background
	c.obs.sessionEnded(sessionEndEvent{lease: old.id, cause: old.Err()})
	if !errors.Is(old.Err(), ErrLeaseExpired) {
		// Keepalives may have landed with their replies lost: the lease
		// and its keys may still be in etcd. Free them for others.
		c.revokeLater(old.id) // the count is held above: Close has not returned
	}
	return nil, nil
}

// revokeLater revokes lease id in the background, bounded by the cleanup
// timeout. The caller holds a count of c.wg, so that Close waits for it.
func (c *Client) revokeLater(id clientv3.LeaseID) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.revoke(id)
	}()
}

// revoke revokes lease id, bounded by the cleanup timeout.
func (c *Client) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.cleanupTimeout)
	defer cancel()
	c.cli.Revoke(ctx, id)
}

// grant creates the Client's session, its grant bounded by ctx and by
// Close; a session granted after Close began is closed at once. The
// lease's ID is chosen here, not by etcd, so that a grant whose outcome is
// unknown (its reply lost, or cancelled by Close while the request was out)
// can still be revoked: otherwise a grant that landed would leave a lease
// nobody knows alive for its whole TTL. Close waits for that revoke: the
// grant counts in c.wg from before the request until the revoke is done.
// A grant that failed while the Client had no connection to etcd is not
// revoked (the revoke could not reach etcd either, and Close would wait
// the cleanup timeout for nothing): should it have landed before the
// connection went, its lease expires after its TTL, as every lease of a
// Client that cannot reach etcd does.
func (c *Client) grant(ctx context.Context) (*session, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	id := newLeaseID()
	s, err := newSession(gctx, c.cli, id, c.o.ttlSeconds(), c.obs)
	var noConn *noConnectionError
	if err != nil && !refused(err) && !errors.As(err, &noConn) {
		c.wg.Add(1) // safe: this call's count is still held
		go func() {
			defer c.wg.Done()
			c.forget(id)
		}()
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if !c.closed {
		c.sess = s
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.Background(), c.o.cleanupTimeout)
	defer cancel()
	s.close(rctx, ErrClosed, true)
	return nil, ErrClosed
}

// forget sees that lease id, whose grant's outcome is unknown, is not left
// alive for its TTL, bounded by the cleanup timeout. A revoke alone cannot:
// the grant may still be in flight (etcd serves the two requests
// concurrently, and a cancelled request may be applied after a later one),
// and land after a revoke that found nothing. So the ID is taken by a
// placeholder lease of the shortest TTL, which a late grant cannot
// replace ("lease already exists") and which expires on its own; when the
// ID is already taken, the grant has landed: revoke it and try again.
func (c *Client) forget(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.cleanupTimeout)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := c.cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return // unknown: a lease granted, if any, expires after its TTL
		}
		_, err := clientv3.RetryLeaseClient(c.cli).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: int64(id), TTL: 1}, grpc.WaitForReady(true))
		if !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
			return // the placeholder holds the ID (or its outcome is unknown too)
		}
	}
}

// Close ends the client's session: it stops the keepalives and revokes the
// lease, so every lock taken through c is released at once and their Done
// channels close with [ErrClosed]; [Client.Observe] channels close and
// [Client.Run] returns [ErrClosed]. The revoke is bounded by ctx and by the
// cleanup timeout ([WithCleanupTimeout]), or by the cleanup timeout alone
// when ctx has already ended; if it fails, the lease expires on its own
// after its TTL and Close returns the error. Close then waits for the
// client's goroutines. Close is idempotent: a Close called while another
// runs (a signal handler beside a defer) returns when that one has
// finished, and every Close returns the first one's result. Every
// acquisition (of a lock, a reader's share, a permit or a term) fails with
// [ErrClosed] afterwards.
func (c *Client) Close(ctx context.Context) error {
	if err := c.checkCall(ctx, "Close"); err != nil {
		return err
	}
	c.mu.Lock()
	s := c.sess
	already := c.closed
	c.closed = true
	c.sess = nil
	c.mu.Unlock()
	if already {
		<-c.closeDone
		return c.closeErr
	}
	defer close(c.closeDone)
	c.closeErr = c.explain(c.close(ctx, s))
	return c.closeErr
}

// close is the first Close's work: end the session s (nil: none) and wait
// for the Client's goroutines.
func (c *Client) close(ctx context.Context, s *session) error {
	c.stop()
	var err error
	if s != nil {
		rctx := ctx
		if ctx.Err() != nil {
			rctx = context.WithoutCancel(ctx)
		}
		rctx, cancel := context.WithTimeout(rctx, c.o.cleanupTimeout)
		defer cancel()
		err = s.close(rctx, ErrClosed, true)
	}
	c.wg.Wait()
	return err
}

// keys is c's key layout.
func (c *Client) keys() layout { return layout(c.o.prefix) }

// explain wraps an error etcd gave for a missing permission in a
// *PermissionError naming the prefix to grant, and returns other errors as
// they are.
func (c *Client) explain(err error) error {
	if !errors.Is(err, rpctypes.ErrPermissionDenied) {
		return err // nil, on every successful call: spares pe's allocation
	}
	var pe *PermissionError // on the heap: errors.As takes its address
	if errors.As(err, &pe) {
		return err
	}
	return &PermissionError{Prefix: c.o.prefix, Err: err}
}
