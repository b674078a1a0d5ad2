package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/examples/internal/story"
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
	how := "SIGKILL (a crash: no cleanup)"
	if graceful {
		how = "SIGTERM (a graceful stop: the holder releases)"
	}
	fmt.Fprintf(s.out, "\n=== %s, holder stopped with %s\n", title(backend), how)
	t := story.NewTimeline(s.out)
	addr := s.redis.Addr()
	if backend == "etcd" {
		addr = s.etcd
	}
	p, err := startHolder(holderConfig{Backend: backend, Addr: addr, Key: key})
	if err != nil {
		return h, err
	}
	defer p.Stop(5 * time.Second)
	if h.old, err = p.Next(reportTimeout, "LOCKED"); err != nil {
		return h, err
	}
	t.Say("holder (pid %d) takes %q, TTL %v, renewed every %v: %s", p.Pid(), key, ttl, (ttl / 3).Round(time.Millisecond), token(backend, h.old))
	got := make(chan acquired, 1)
	go func() { got <- s.waitFor(ctx, backend, key) }()
	if err := s.awaitWaiter(ctx, backend, key); err != nil {
		return h, err
	}
	t.Say("B waits for it (%s)", waitHow(backend))
	start := time.Now()
	if graceful {
		err = p.Signal(syscall.SIGTERM)
	} else {
		p.Kill()
	}
	if err != nil {
		return h, err
	}
	t.Say("holder sent %s", how)
	a := <-got
	h.wait = time.Since(start)
	if a.err != nil {
		return h, a.err
	}
	h.new = a.token
	t.Say("B holds %q %s after the signal: %s", key, story.Ms(h.wait), token(backend, h.new))
	if graceful {
		return h, p.Wait(reportTimeout)
	}
	return h, nil
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
