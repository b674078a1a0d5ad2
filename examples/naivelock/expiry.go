package main

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/examples/internal/story"
)

// giveUp bounds B's wait for a lock whose holder died without a TTL: any
// acquisition needs a bound, and this one would otherwise wait forever.
const giveUp = 2 * time.Second

// expiryTTL is the TTL of the fixed lock in part 2.
const expiryTTL = time.Second

// expiryResult is what part 2 saw after the holder was killed.
type expiryResult struct {
	naivePTTL  time.Duration // of the dead holder's key: -1 ns means no expiry
	naiveTaken bool          // B got the lock within giveUp
	fixedWait  time.Duration // from the kill to B holding the lock with a TTL
}

// expiry plays part 2: a holder process takes the lock without a TTL and
// is SIGKILLed; then the same with a TTL.
func (l *lessonEnv) expiry(ctx context.Context) (expiryResult, error) {
	var r expiryResult
	t := l.part(2, "no expiry: the holder is killed, the lock is held forever")
	c := l.client()
	defer c.Close()
	if err := l.killHolder(ctx, t, holderConfig{Key: "report", TTL: 0}, "SET report <value> NX (no TTL)"); err != nil {
		return r, err
	}
	pttl, err := c.PTTL(ctx, "report").Result()
	if err != nil {
		return r, err
	}
	r.naivePTTL = pttl
	t.Say("the key is still there: PTTL report returns %d, no expiry", pttl)
	wctx, cancel := context.WithTimeout(ctx, giveUp)
	lock, err := redislock.Acquire(wctx, c, "report", expiryTTL)
	cancel()
	r.naiveTaken = lock != nil
	if lock != nil {
		t.Say("B got the lock (unexpected)")
	} else {
		t.Say("B tried for %v and gave up: %v. No one will ever release it but an operator.", giveUp, err)
	}
	t.Conclude("the fix: give the lock a TTL, SET key value NX PX ttl, so a dead holder's lock expires")

	if err := l.killHolder(ctx, t, holderConfig{Key: "report2", TTL: expiryTTL}, "SET report2 <value> NX PX 1000"); err != nil {
		return r, err
	}
	killed := time.Now()
	if _, err := redislock.Acquire(ctx, c, "report2", expiryTTL); err != nil {
		return r, err
	}
	r.fixedWait = time.Since(killed)
	t.Say("B gets the lock %s after the kill: the TTL ran out", story.Ms(r.fixedWait))
	return r, nil
}

// killHolder starts a holder process with cfg, waits until it holds the
// lock and SIGKILLs it.
func (l *lessonEnv) killHolder(ctx context.Context, t *story.Timeline, cfg holderConfig, how string) error {
	cfg.Addr = l.srv.Addr()
	p, err := startHolder(cfg)
	if err != nil {
		return err
	}
	defer p.Stop(5 * time.Second)
	v, err := p.Next(reportTimeout, "LOCKED")
	if err != nil {
		return err
	}
	t.Say("holder process (pid %d) takes the lock: %s -> value %s", p.Pid(), how, v)
	p.Kill()
	t.Say("holder process SIGKILLed: it never releases")
	return ctx.Err()
}
