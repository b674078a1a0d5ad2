package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// session is one etcd lease kept alive by this process.
//
// It renews the lease itself, one keepalive every TTL/3 on its own stream
// (see keepalive), rather than with clientv3's KeepAlive, because it needs
// the send time of each acknowledged keepalive: validUntil is that send time
// plus the granted TTL. etcd starts a renewed lease's TTL when it receives
// the keepalive, which is after we sent it, so validUntil is never later
// than etcd's own expiry (as long as this machine's monotonic clock does not
// run slower than the leader's).
type session struct {
	obs engineObserver
	cli *clientv3.Client
	id  clientv3.LeaseID
	hex string        // id as in keys and etcdctl (leaseHex)
	ttl time.Duration // granted by etcd
	ka  keepalive     // used by keepAlive alone

	ctx        context.Context // ends when the session is closed or lost
	cancel     context.CancelFunc
	done       chan struct{} // closed by the first end, after its locks' Done
	wg         sync.WaitGroup
	anchorMono time.Time // the clocks read together when the session began (see until); read-only
	anchorBoot instant

	lanes lanes // guarded by its own mutex

	mu         sync.Mutex           // guards the fields below
	validUntil instant              // see instant
	err        error                // why the session ended; nil while it lives
	locks      map[holding]struct{} // held on this session; nil once it ended
}

// holding is what a session's end ends: a Lock held on it (lock.go).
type holding interface {
	// closeDone records cause and closes Done, and reports whether this
	// was its first end; the session calls it for every holding before it
	// closes its own done.
	closeDone(cause error) bool
	// afterEnd follows a first closeDone, once every Done is closed.
	afterEnd(cause error)
}

// addLock registers l, whose Done the session closes when it ends; it
// fails with the session's end if that came first.
func (s *session) addLock(l holding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.locks == nil {
		s.locks = make(map[holding]struct{})
	}
	s.locks[l] = struct{}{}
	return nil
}

// removeLock forgets l once its Done is closed.
func (s *session) removeLock(l holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.locks, l)
}

// retry calls try, after pauses that double from 100 ms to 5 s, until it
// reports that there is nothing more to do (true) or the session ends
// (false).
func (s *session) retry(try func() bool) bool {
	b := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	for b.wait(s.ctx, nil) == nil {
		if try() {
			return true
		}
	}
	return false
}

// retryInterval is the pause between keepalive attempts after a failure.
func (s *session) retryInterval() time.Duration { return min(s.ttl/10, 250*time.Millisecond) }

// newLeaseID returns a lease ID for a grant: random, so that no two
// Clients choose the same one (63 random bits), and positive, as etcd's own.
func newLeaseID() clientv3.LeaseID { return clientv3.LeaseID(rand.Int64N(math.MaxInt64) + 1) }

// newSession grants lease id and starts renewing it.
//
// The grant is safe to arrive twice: a second delivery of it (clientv3
// retries a grant whose reply was lost) is refused as "lease already
// exists", which for an ID drawn at random for this grant means the first
// delivery landed, so the lease is ours, granted no later than we sent the
// request and with at least the TTL asked for.
func newSession(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, ttlSeconds int64, obs engineObserver) (*session, error) {
	sent := now()
	anchorMono, anchorBoot := time.Now(), sent
	ttl := ttlSeconds
	// WaitForReady, as clientv3 sends every request (cli.Grant included):
	// without it a grant made while the connection is down fails at once,
	// and after clientv3's retries (about 2.5 s) ends the Lock before ctx.
	resp, err := clientv3.RetryLeaseClient(cli).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: int64(id), TTL: ttlSeconds}, grpc.WaitForReady(true))
	switch {
	case err == nil:
		ttl = resp.TTL
	case errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist):
	default:
		return nil, fmt.Errorf("etcdlock: grant lease: %w", connError(cli, rpctypes.Error(clientv3.ContextError(ctx, err))))
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &session{
		obs:        obs,
		cli:        cli,
		id:         id,
		hex:        leaseHex(id),
		ka:         keepalive{cli: cli, id: id},
		ttl:        time.Duration(ttl) * time.Second,
		ctx:        sctx,
		cancel:     cancel,
		done:       make(chan struct{}),
		validUntil: sent.add(time.Duration(ttl) * time.Second),
		anchorMono: anchorMono,
		anchorBoot: anchorBoot,
	}
	s.wg.Add(1)
	go s.keepAlive()
	return s, nil
}

// until is the validity deadline as an instant of Go's monotonic clock.
//
// It is computed from an anchor, a reading of both clocks taken together
// when the session began, so that it is the same instant at every call
// while the machine is not suspended (two readings of two clocks a few
// nanoseconds apart would make it wander): the deadline's distance from
// the anchor on the deadline's clock, less the time the machine was
// suspended since, which moves the monotonic clock behind (counted from
// suspendSlack, so that reading jitter is not taken for a suspend). A
// suspend is never counted short, which would put the deadline late: the
// monotonic clock is read before the deadline's, so that a pause between
// the two readings adds to it, and it is rounded up to the millisecond
// (TestResumeWithTimeLeftRenews saw a deadline 0.24 ms late when it was
// rounded down).
func (s *session) until() time.Time {
	s.mu.Lock()
	ahead := s.validUntil.sub(s.anchorBoot)
	s.mu.Unlock()
	mono := time.Since(s.anchorMono)
	suspended := now().sub(s.anchorBoot) - mono
	if suspended < suspendSlack {
		suspended = 0
	}
	return s.anchorMono.Add(ahead - (suspended + time.Millisecond - 1).Truncate(time.Millisecond))
}

// suspendSlack is the least gap between the two clocks taken for a
// suspend (see until).
const suspendSlack = 50 * time.Millisecond

// left is the time to the validity deadline (negative once it passed).
func (s *session) left() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil.sub(now())
}

// Err returns why the session ended, or nil while it is alive.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end records the first cause, closes done and the Done of every lock held
// on the session, and ends every request made on the session's behalf.
//
// The locks' Done channels are closed here, in one loop, before the
// session's own channel: with thousands of locks held, waking a goroutine
// per lock to close its own would put the last Done well past the validity
// deadline. Telemetry, and stopping the locks' key watches, follow.
//
// A call that finds the session ending already returns once that end has
// closed the locks' Done, so that Close, whose own end may be such a call,
// returns only after every lock's Done is closed.
func (s *session) end(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.err = cause
	locks := s.locks
	s.locks = nil
	s.mu.Unlock()
	lc := sessionCause(cause)
	ended := make([]holding, 0, len(locks))
	for l := range locks {
		if l.closeDone(lc) {
			ended = append(ended, l)
		}
	}
	close(s.done) // after the Done channels
	s.cancel()
	for _, l := range ended {
		l.afterEnd(lc)
	}
}

// check returns why the session cannot be relied on, or nil.
func (s *session) check() error {
	if err := s.Err(); err != nil {
		return err
	}
	if s.left() <= 0 {
		return ErrValidityExpired
	}
	return nil
}

// resumeCheck bounds how long the renewal goroutine sleeps: Go's timers run
// on a clock that stops while the machine is suspended, so after a resume
// a timer fires as late as the suspend lasted, and the deadline (see
// instant) must be looked at again soon.
const resumeCheck = 500 * time.Millisecond

// keepAlive renews the lease until the session is closed or lost. It wakes at the
// next renewal time or at the validity deadline, whichever is first (and
// at least every resumeCheck), so done closes no later than the deadline
// when no keepalive is acknowledged, and soon after a resume that finds it
// passed.
//
// The renewal time is on the deadline's clock (see instant), not Go's:
// after a resume that leaves the deadline ahead, the renewal that was due
// during the suspend goes out at the first wakeup, while etcd, which did
// not sleep, may still have the lease. On Go's clock it would wait for as
// long as the suspend lasted, past the deadline of a suspend longer than
// two thirds of the TTL, and the lock would be given up needlessly.
func (s *session) keepAlive() {
	defer s.wg.Done()
	defer s.ka.close()
	next := now().add(s.ttl / 3)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wake := min(next.sub(now()), s.left(), resumeCheck)
		timer.Reset(max(wake, 0))
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
		if s.left() <= 0 {
			s.end(ErrValidityExpired)
			return
		}
		if now().before(next) {
			continue
		}
		switch err := s.renew(); {
		case err == nil:
			next = now().add(s.ttl / 3)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.end(ErrLeaseExpired)
			return
		default:
			next = now().add(s.retryInterval())
		}
	}
}

// renew sends one keepalive, bounded by the validity deadline and by a third
// of the TTL, so that a keepalive stuck on a hung stream is given up and
// retried on a new one while the lease can still be saved.
func (s *session) renew() error {
	deadline := time.Now().Add(max(s.ttl/3, 100*time.Millisecond))
	if u := s.until(); u.Before(deadline) {
		deadline = u
	}
	sent, ttl, err := s.ka.renew(s.ctx, deadline)
	if err != nil {
		return err
	}
	t := now()
	s.mu.Lock()
	if u := sent.add(ttl); s.validUntil.before(u) {
		s.validUntil = u
	}
	margin := s.validUntil.sub(t)
	s.mu.Unlock()
	s.obs.renewed(renewEvent{rtt: t.sub(sent), margin: margin})
	return nil
}

// close stops renewing and ends the session with cause; when revoke is set it
// also revokes the lease (bounded by ctx) so its keys go at once.
func (s *session) close(ctx context.Context, cause error, revoke bool) error {
	// A session past its validity deadline may still have its lease in
	// etcd (keepalives landed, their replies did not): revoke unless etcd
	// said the lease is gone.
	gone := errors.Is(s.Err(), ErrLeaseExpired)
	s.end(cause) // the cause is recorded before the context ends, which stops run
	s.wg.Wait()
	if !revoke || gone {
		return nil
	}
	if _, err := s.cli.Revoke(ctx, s.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdlock: revoke lease %x: %w", int64(s.id), err)
	}
	return nil
}

// sessionCause turns a session's end into a lock's.
func sessionCause(cause error) error {
	if errors.Is(cause, ErrClosed) {
		return ErrClosed
	}
	return lost(cause)
}
