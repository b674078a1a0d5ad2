package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// session is one etcd lease kept alive by this process.
//
// It renews the lease itself, one KeepAliveOnce every TTL/3, rather than with
// clientv3's KeepAlive, because it needs the send time of each acknowledged
// keepalive: validUntil is that send time plus the granted TTL. etcd starts a
// renewed lease's TTL when it receives the keepalive, which is after we sent
// it, so validUntil is never later than etcd's own expiry (as long as this
// machine's monotonic clock does not run slower than the leader's).
type session struct {
	cli *clientv3.Client
	id  clientv3.LeaseID
	ttl time.Duration // granted by etcd

	ctx    context.Context // ends when the session is closed or lost
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	mu         sync.Mutex
	validUntil time.Time
	err        error
	slots      map[string]map[int]bool // lock name -> slots in use
}

// takeSlot returns the lowest slot not in use for name and marks it used.
// Slots make a session's concurrent acquisitions of one name use distinct
// keys while letting successive ones reuse a key.
func (s *session) takeSlot(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.slots = map[string]map[int]bool{}
	}
	used := s.slots[name]
	if used == nil {
		used = map[int]bool{}
		s.slots[name] = used
	}
	n := 0
	for used[n] {
		n++
	}
	used[n] = true
	return n
}

// releaseSlot makes slot n of name free again; its key must be gone.
func (s *session) releaseSlot(name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.slots[name], n)
	if len(s.slots[name]) == 0 {
		delete(s.slots, name)
	}
}

// retryInterval is the pause between keepalive attempts after a failure.
func (s *session) retryInterval() time.Duration { return min(s.ttl/10, 250*time.Millisecond) }

func newSession(ctx context.Context, cli *clientv3.Client, ttlSeconds int64) (*session, error) {
	sent := time.Now()
	resp, err := cli.Grant(ctx, ttlSeconds)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: grant lease: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &session{
		cli:        cli,
		id:         resp.ID,
		ttl:        time.Duration(resp.TTL) * time.Second,
		ctx:        sctx,
		cancel:     cancel,
		done:       make(chan struct{}),
		validUntil: sent.Add(time.Duration(resp.TTL) * time.Second),
	}
	s.wg.Add(1)
	go s.run()
	return s, nil
}

func (s *session) until() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil
}

// Err returns why the session ended, or nil while it is alive.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end records the first cause and closes done.
func (s *session) end(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = cause
	close(s.done)
	s.cancel() // ends every request made on the session's behalf
}

// alive reports whether the session has neither ended nor passed its
// validity deadline.
func (s *session) alive() bool { return s.check() == nil }

// check returns why the session cannot be relied on, or nil.
func (s *session) check() error {
	if err := s.Err(); err != nil {
		return err
	}
	if !time.Now().Before(s.until()) {
		return ErrValidityExpired
	}
	return nil
}

// run renews the lease until the session is closed or lost. It wakes at the
// next renewal time or at the validity deadline, whichever is first, so done
// closes no later than the deadline when no keepalive is acknowledged.
func (s *session) run() {
	defer s.wg.Done()
	next := time.Now().Add(s.ttl / 3)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wake := min(time.Until(next), time.Until(s.until()))
		timer.Reset(max(wake, 0))
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
		if !time.Now().Before(s.until()) {
			s.end(ErrValidityExpired)
			return
		}
		if time.Now().Before(next) {
			continue
		}
		switch err := s.renew(); {
		case err == nil:
			next = time.Now().Add(s.ttl / 3)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.end(ErrLeaseExpired)
			return
		default:
			next = time.Now().Add(s.retryInterval())
		}
	}
}

// renew sends one keepalive, bounded by the validity deadline.
func (s *session) renew() error {
	sent := time.Now()
	ctx, cancel := context.WithDeadline(s.ctx, s.until())
	defer cancel()
	resp, err := s.cli.KeepAliveOnce(ctx, s.id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := sent.Add(time.Duration(resp.TTL) * time.Second); u.After(s.validUntil) {
		s.validUntil = u
	}
	return nil
}

// close stops renewing and ends the session with cause; when revoke is set it
// also revokes the lease (bounded by ctx) so its keys go at once.
func (s *session) close(ctx context.Context, cause error, revoke bool) error {
	s.cancel()
	s.wg.Wait()
	wasAlive := s.alive()
	s.end(cause)
	if !revoke || !wasAlive {
		return nil
	}
	if _, err := s.cli.Revoke(ctx, s.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdlock: revoke lease %x: %w", int64(s.id), err)
	}
	return nil
}
