package main

import (
	"context"
	"strings"
	"time"

	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// pausedTTL is the paused holder's TTL in part 4.
const pausedTTL = time.Second

// pausedResult is what part 4 left in the resource.
type pausedResult struct {
	final  string // the balance
	result string // A's RESULT: whether its release found its own lock
}

// paused plays part 4: the lock with all three fixes, a holder process
// frozen (SIGSTOP) between its check and its write, past its TTL.
func (l *lessonEnv) paused(ctx context.Context) (pausedResult, error) {
	var r pausedResult
	t := l.part(4, "all three fixed, and still: a paused holder writes after the next one")
	c := l.client()
	defer c.Close()
	p, err := startHolder(holderConfig{Addr: l.srv.Addr(), Key: "ledger", TTL: pausedTTL, Write: true})
	if err != nil {
		return r, err
	}
	defer p.Stop(5 * time.Second)
	v, err := p.Next(reportTimeout, "LOCKED")
	if err != nil {
		return r, err
	}
	t.Say("A (pid %d) takes %q: SET NX PX %d, value %s", p.Pid(), "ledger", pausedTTL.Milliseconds(), v)
	if _, err := p.Next(reportTimeout, "READY"); err != nil {
		return r, err
	}
	t.Say("A checks the key still holds its value: yes. It is about to write...")
	if err := p.Pause(); err != nil {
		return r, err
	}
	t.Say("A is frozen (SIGSTOP: think GC pause, VM migration)")
	if err := p.Send(childproc.Go); err != nil { // read once A runs again
		return r, err
	}
	b, err := redislock.Acquire(ctx, c, "ledger", time.Minute)
	if err != nil {
		return r, err
	}
	t.Say("A's TTL ran out; B takes %q (value %s)", "ledger", b.Value)
	if err := c.Set(ctx, "balance", "B: balance=100", 0).Err(); err != nil {
		return r, err
	}
	t.Say("B writes balance=100 and releases with compare-and-delete")
	if _, err := b.Release(ctx); err != nil {
		return r, err
	}
	if err := p.Resume(); err != nil {
		return r, err
	}
	t.Say("A wakes up (SIGCONT), still past its check, and writes balance=90")
	if r.result, err = p.Next(reportTimeout, "RESULT"); err != nil {
		return r, err
	}
	t.Say("A releases with compare-and-delete: %s (nothing of A's was left to delete)", strings.TrimSpace(r.result))
	if r.final, err = c.Get(ctx, "balance").Result(); err != nil {
		return r, err
	}
	t.Say("final value: %q", r.final)
	if strings.HasPrefix(r.final, "A:") {
		t.Conclude("LOST UPDATE: B's write was overwritten by a holder whose TTL had run out.\n" +
			"The lock's value is random: the resource cannot tell that A's write is the older one.\n" +
			"fencelock's token is ordered, and a resource that checks it refuses A: go run ./cmd/fencedemo")
	}
	return r, nil
}
