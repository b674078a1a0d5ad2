// Package redislock is the single-Redis lock the lessons end up with once
// the three naive bugs are fixed: SET NX PX (atomic, with a TTL), released
// and extended only by a script that checks the stored value is still the
// holder's own. It is the lock the folklore recommends, written out so the
// lessons can show what it does and what it cannot do: its value is random,
// unique to one acquisition but not ordered, so a resource cannot tell an
// old holder's write from a new one's. It is not part of fencelock.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// retryInterval is how often a waiting Acquire tries again: a single Redis
// lock has no queue and no notification, so waiters poll.
const retryInterval = 10 * time.Millisecond

// compareAndDelete deletes the key only if it still holds the caller's
// value, in one step on the server.
var compareAndDelete = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)

// compareAndExpire extends the key's TTL only if it still holds the
// caller's value.
var compareAndExpire = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end
return 0`)

// Lock is one acquisition: the key and the random value that marks it as
// this holder's.
type Lock struct {
	c     *redis.Client
	Key   string
	Value string
	TTL   time.Duration
}

// TryAcquire takes key for ttl if it is free (SET key value NX PX ttl),
// and returns nil, nil if it is held.
func TryAcquire(ctx context.Context, c *redis.Client, key string, ttl time.Duration) (*Lock, error) {
	v := NewValue()
	ok, err := c.SetNX(ctx, key, v, ttl).Result()
	if err != nil || !ok {
		return nil, err
	}
	return &Lock{c: c, Key: key, Value: v, TTL: ttl}, nil
}

// Acquire tries to take key every 10 ms until it gets it or ctx ends.
func Acquire(ctx context.Context, c *redis.Client, key string, ttl time.Duration) (*Lock, error) {
	t := time.NewTicker(retryInterval)
	defer t.Stop()
	for {
		l, err := TryAcquire(ctx, c, key, ttl)
		if l != nil || err != nil {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redislock: %s still held: %w", key, ctx.Err())
		case <-t.C:
		}
	}
}

// Release deletes the key if it is still this lock's, and reports whether
// it was.
func (l *Lock) Release(ctx context.Context) (bool, error) {
	n, err := compareAndDelete.Run(ctx, l.c, []string{l.Key}, l.Value).Int()
	return n == 1, err
}

// Extend sets the key's TTL back to the lock's if it is still this lock's,
// and reports whether it was.
func (l *Lock) Extend(ctx context.Context) (bool, error) {
	n, err := compareAndExpire.Run(ctx, l.c, []string{l.Key}, l.Value, l.TTL.Milliseconds()).Int()
	return n == 1, err
}

// KeepAlive extends the lock every third of its TTL until ctx ends or the
// lock is found gone; it is what a holder runs beside its work.
func (l *Lock) KeepAlive(ctx context.Context) {
	t := time.NewTicker(l.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ok, err := l.Extend(ctx); err == nil && !ok {
				return
			}
		}
	}
}

// NewValue returns a random value, unique to one acquisition.
func NewValue() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Held reports whether the key still holds this lock's value: the check a
// holder makes before it writes, which is stale the moment it returns.
func (l *Lock) Held(ctx context.Context) (bool, error) {
	v, err := l.c.Get(ctx, l.Key).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return v == l.Value, err
}
