package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// raceRounds is how many times the two clients race for the lock.
const raceRounds = 200

// raceResult counts the rounds in which both clients held the lock.
type raceResult struct {
	naiveBoth, fixedBoth, fixedOne int
}

// acquireFunc takes key for me on c, and reports whether it did.
type acquireFunc func(ctx context.Context, c *redis.Client, key, me string) (bool, error)

// getThenSet is the naive lock: look, then take. Between the GET and the
// SET another client can look too, see the same free lock and take it.
func getThenSet(ctx context.Context, c *redis.Client, key, me string) (bool, error) {
	err := c.Get(ctx, key).Err()
	switch {
	case err == nil:
		return false, nil // held
	case !errors.Is(err, redis.Nil):
		return false, err
	}
	return true, c.Set(ctx, key, me, 0).Err()
}

// setNX is the fix: one command that takes the key only if it is absent.
func setNX(ctx context.Context, c *redis.Client, key, me string) (bool, error) {
	return c.SetNX(ctx, key, me, time.Minute).Result()
}

// race plays part 1: two clients start for the lock at the same instant,
// many times, with the naive lock and then with SET NX.
func (l *lessonEnv) race(ctx context.Context) (raceResult, error) {
	var r raceResult
	t := l.part(1, "GET then SET: two clients look, both see it free, both take it")
	a, b := l.client(), l.client()
	defer a.Close()
	defer b.Close()
	t.Say("clients A and B race for lock %q, %d rounds; each round both start at once", "race", raceRounds)
	counts, err := raceMany(ctx, a, b, getThenSet)
	if err != nil {
		return r, err
	}
	r.naiveBoth = counts[2]
	t.Say("GET-then-SET: both held the lock in %d of %d rounds", counts[2], raceRounds)
	counts, err = raceMany(ctx, a, b, setNX)
	if err != nil {
		return r, err
	}
	r.fixedBoth, r.fixedOne = counts[2], counts[1]
	t.Say("SET NX:       both held the lock in %d of %d rounds, exactly one in %d", counts[2], raceRounds, counts[1])
	if r.naiveBoth > 0 && r.fixedBoth == 0 {
		t.Conclude("the fix: take the lock in one atomic command, SET key value NX")
	}
	return r, nil
}

// raceMany runs raceRounds rounds and counts them by how many clients won.
func raceMany(ctx context.Context, a, b *redis.Client, acquire acquireFunc) ([3]int, error) {
	var counts [3]int
	for range raceRounds {
		n, err := raceOnce(ctx, a, b, acquire)
		if err != nil {
			return counts, err
		}
		counts[n]++
		if err := a.Del(ctx, "race").Err(); err != nil {
			return counts, err
		}
	}
	return counts, nil
}

// raceOnce lets both clients try at the same instant and returns how many
// got the lock. Each holds what it got until both have tried, so "both
// held it" means at the same time.
func raceOnce(ctx context.Context, a, b *redis.Client, acquire acquireFunc) (int, error) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	var got [2]bool
	var errs [2]error
	for i, c := range []*redis.Client{a, b} {
		wg.Go(func() {
			<-start
			got[i], errs[i] = acquire(ctx, c, "race", string(rune('A'+i)))
		})
	}
	close(start)
	wg.Wait()
	n := 0
	for _, g := range got {
		if g {
			n++
		}
	}
	return n, errors.Join(errs[:]...)
}
