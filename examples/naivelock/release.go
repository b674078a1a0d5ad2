package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/examples/internal/story"
)

// releaseTTL is A's lease in part 3, shorter than A's work.
const releaseTTL = 500 * time.Millisecond

// releaseResult is whether C got the lock while B still held it, with each
// release.
type releaseResult struct {
	naiveStolen, fixedStolen bool
	fixedReleased            bool // what A's compare-and-delete reported
}

// release plays part 3 twice: A outlives its TTL, B takes the lock, A
// finishes and releases; then C asks. First A releases with a plain DEL,
// then with the compare-and-delete script.
func (l *lessonEnv) release(ctx context.Context) (releaseResult, error) {
	var r releaseResult
	t := l.part(3, "release without a check: A's TTL runs out, B takes the lock, A deletes B's lock")
	c := l.client()
	defer c.Close()
	var err error
	if r.naiveStolen, _, err = l.releaseRound(ctx, t, c, "job", false); err != nil {
		return r, err
	}
	if r.naiveStolen {
		t.Conclude("B and C both hold the lock: A deleted a lock that was no longer its own")
	}
	if r.fixedStolen, r.fixedReleased, err = l.releaseRound(ctx, t, c, "job2", true); err != nil {
		return r, err
	}
	if !r.fixedStolen {
		t.Conclude("the fix: release with a script that deletes the key only if it still holds your value")
	}
	return r, nil
}

// releaseRound is one round of part 3; it reports whether C got the lock
// while B held it, and what a checked release by A reported.
func (l *lessonEnv) releaseRound(ctx context.Context, t *story.Timeline, c *redis.Client, key string, checked bool) (stolen, released bool, err error) {
	a, err := redislock.TryAcquire(ctx, c, key, releaseTTL)
	if err != nil || a == nil {
		return false, false, err
	}
	t.Say("A takes %q for %v (value %s) and starts work that takes longer than that", key, releaseTTL, a.Value)
	b, err := redislock.Acquire(ctx, c, key, time.Minute) // waits for A's TTL to run out
	if err != nil {
		return false, false, err
	}
	t.Say("A's TTL ran out; B takes %q (value %s) and starts its work", key, b.Value)
	if checked {
		released, err = a.Release(ctx)
		t.Say("A finishes and releases with compare-and-delete: deleted=%v (the value is B's, not A's)", released)
	} else {
		err = c.Del(ctx, key).Err()
		t.Say("A finishes and releases: DEL %s", key)
	}
	if err != nil {
		return false, false, err
	}
	cl, err := redislock.TryAcquire(ctx, c, key, time.Minute)
	if err != nil {
		return false, false, err
	}
	if cl != nil {
		t.Say("C asks for %q: granted (value %s), while B is still working", key, cl.Value)
	} else {
		t.Say("C asks for %q: refused, B still holds it", key)
	}
	return cl != nil, released, c.Del(ctx, key).Err()
}
