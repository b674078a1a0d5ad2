package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/examples/internal/redisproc"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// holderConfig is what a holder process is told, as JSON in [envHolder].
type holderConfig struct {
	Addr  string        // of the Redis server
	Key   string        // of the lock
	TTL   time.Duration // 0: no expiry
	Write bool          // check the lock, wait for the go-ahead, write the balance
}

// holder takes the lock with SET NX (PX when TTL is set) and reports LOCKED
// with its value. With Write it then checks that the lock is still its own,
// reports READY, waits for the go-ahead (a pause lands here), writes the
// resource and reports RESULT. Either way it then holds on until stdin
// ends; killed, it never releases.
func holder(js string, stdin io.Reader, stdout io.Writer) error {
	var cfg holderConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return err
	}
	c := redisproc.NewClient(cfg.Addr)
	defer c.Close()
	ctx := context.Background()
	lock, err := redislock.TryAcquire(ctx, c, cfg.Key, cfg.TTL)
	if err == nil && lock == nil {
		err = errors.New("held by someone else")
	}
	if err != nil {
		return fmt.Errorf("holder: lock %s: %w", cfg.Key, err)
	}
	if err := childproc.Report(stdout, "LOCKED", lock.Value); err != nil {
		return err
	}
	if cfg.Write {
		if err := checkAndWrite(ctx, c, lock, stdin, stdout); err != nil {
			return err
		}
	}
	_, err = io.Copy(io.Discard, stdin)
	return err
}

// checkAndWrite is the holder's critical section: it checks the lock is
// its own, and writes the resource after the go-ahead. Then it releases,
// with the compare-and-delete, and reports whether the lock was still its.
func checkAndWrite(ctx context.Context, c *redis.Client, lock *redislock.Lock, stdin io.Reader, stdout io.Writer) error {
	held, err := lock.Held(ctx)
	if err != nil || !held {
		return fmt.Errorf("holder: lock not held before the write: %v", err)
	}
	if err := childproc.Report(stdout, "READY", ""); err != nil {
		return err
	}
	if err := childproc.AwaitGo(stdin); err != nil {
		return err
	}
	if err := c.Set(ctx, "balance", "A: balance=90", 0).Err(); err != nil {
		return err
	}
	released, err := lock.Release(ctx)
	if err != nil {
		return err
	}
	return childproc.Report(stdout, "RESULT", fmt.Sprintf("released=%v", released))
}

// startHolder starts a holder process.
func startHolder(cfg holderConfig) (*childproc.Proc, error) {
	cmd, err := childproc.Reexec(envHolder, cfg)
	if err != nil {
		return nil, err
	}
	return childproc.Start(cmd, nil)
}
