package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/examples/internal/story"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// handoff is one measured handoff: the holder stopped one way, the next
// holder's wait from the signal to holding the lock.
type handoff struct {
	backend  string // "redis" or "etcd"
	graceful bool   // SIGTERM, else SIGKILL
	wait     time.Duration
	old, new string // the holders' tokens (etcd) or values (Redis)
}

// handoffs plays the four handoffs: each backend, each way of stopping.
func (s *servers) handoffs(ctx context.Context) ([]handoff, error) {
	var hs []handoff
	for i, graceful := range []bool{false, true} {
		for j, backend := range []string{"redis", "etcd"} {
			h, err := s.handoff(ctx, backend, graceful, fmt.Sprintf("report-%d%d", i, j))
			if err != nil {
				return hs, err
			}
			hs = append(hs, h)
		}
	}
	return hs, nil
}

// handoff starts a holder process on key, starts the next holder waiting
// here, stops the holder, and measures the wait.
func (s *servers) handoff(ctx context.Context, backend string, graceful bool, key string) (handoff, error) {
	h := handoff{backend: backend, graceful: graceful}
	fmt.Fprintf(s.out, "\n=== %s, holder stopped with %s\n", title(backend), stopHow(graceful))
	t := story.NewTimeline(s.out)
	p, err := s.startHolder(t, &h, key)
	if err != nil {
		return h, err
	}
	defer p.Stop(5 * time.Second)
	got := make(chan acquired, 1)
	go func() { got <- s.waitFor(ctx, backend, key) }()
	if err := s.awaitWaiter(ctx, backend, key); err != nil {
		return h, err
	}
	t.Say("B waits for it (%s)", waitHow(backend))
	start := time.Now()
	if err := stop(p, graceful); err != nil {
		return h, err
	}
	t.Say("holder sent %s", stopHow(graceful))
	a := <-got
	h.wait, h.new = time.Since(start), a.token
	if a.err != nil {
		return h, a.err
	}
	t.Say("B holds %q %s after the signal: %s", key, story.Ms(h.wait), token(backend, h.new))
	if graceful {
		return h, p.Wait(reportTimeout)
	}
	return h, nil
}

// startHolder starts a holder process on key and waits until it holds it.
func (s *servers) startHolder(t *story.Timeline, h *handoff, key string) (*childproc.Proc, error) {
	addr := s.redis.Addr()
	if h.backend == "etcd" {
		addr = s.etcd
	}
	p, err := startHolder(holderConfig{Backend: h.backend, Addr: addr, Key: key})
	if err != nil {
		return nil, err
	}
	if h.old, err = p.Next(reportTimeout, "LOCKED"); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, err
	}
	t.Say("holder (pid %d) takes %q, TTL %v, renewed every %v: %s", p.Pid(), key, ttl, (ttl / 3).Round(time.Millisecond), token(h.backend, h.old))
	return p, nil
}

// stop stops the holder: SIGTERM, or SIGKILL (which returns once it is
// reaped).
func stop(p *childproc.Proc, graceful bool) error {
	if graceful {
		return p.Signal(syscall.SIGTERM)
	}
	p.Kill()
	return nil
}

func stopHow(graceful bool) string {
	if graceful {
		return "SIGTERM (a graceful stop: the holder releases)"
	}
	return "SIGKILL (a crash: no cleanup)"
}

// acquired is the next holder's token or value, or why it has none.
type acquired struct {
	token string
	err   error
}

// waitFor takes the lock as the next holder and releases it at once.
func (s *servers) waitFor(ctx context.Context, backend, key string) acquired {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if backend == "redis" {
		c := s.redis.Client()
		defer c.Close()
		l, err := redislock.Acquire(ctx, c, key, ttl)
		if err != nil {
			return acquired{err: err}
		}
		_, err = l.Release(ctx)
		return acquired{l.Value, err}
	}
	l, err := s.locks.Lock(ctx, key)
	if err != nil {
		return acquired{err: err}
	}
	return acquired{l.Token().String(), l.Unlock(ctx)}
}

// awaitWaiter returns once B waits in etcd's queue, so the signal finds it
// queued; a Redis waiter is a polling loop, with no queue to look at.
func (s *servers) awaitWaiter(ctx context.Context, backend, key string) error {
	if backend == "redis" {
		return nil
	}
	for {
		q, err := s.locks.Inspect(ctx, key)
		if err != nil || len(q.Waiters) > 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // poll: the queue has no "someone joined" signal for an onlooker
		}
	}
}

func title(backend string) string {
	if backend == "redis" {
		return "Redis SET NX PX"
	}
	return "etcd (etcdlock)"
}

func waitHow(backend string) string {
	if backend == "redis" {
		return "SET NX PX every 10 ms: Redis has no queue and no notification"
	}
	return "queued behind the holder, watching its key"
}

func token(backend, v string) string {
	if backend == "redis" {
		return "value " + v
	}
	return "token " + v
}
