package redisholder_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// hookClient is a client that calls after once a script's reply has come
// back, before its caller sees it: a reply held up on the way.
type hookClient struct {
	*redis.Client
	after func(args []any)
}

func (c hookClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := c.Client.EvalSha(ctx, sha, keys, args...)
	if cmd.Err() == nil {
		c.after(args)
	}
	return cmd
}

func (c hookClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := c.Client.Eval(ctx, script, keys, args...)
	if cmd.Err() == nil {
		c.after(args)
	}
	return cmd
}

// Two Refreshes at once, the longer one's reply held up until the shorter
// one has been applied after it: the key ends with the shorter TTL, and
// the deadline must not be the longer one's (Done would close minutes
// after another client could take the key).
func TestConcurrentRefreshesKeepTheEarlierDeadline(t *testing.T) {
	t.Parallel() // it may wait on a timer
	c, k := client(t), key(t)
	r1ran, r2done := make(chan struct{}), make(chan struct{})
	hc := hookClient{Client: c, after: func(args []any) {
		if len(args) == 2 && args[1] == "600000" { // the 10-minute refresh's reply
			close(r1ran)
			select {
			case <-r2done: // held until the 2 s refresh has returned
			case <-time.After(500 * time.Millisecond): // or, refreshes taking turns, not at all
			}
		}
	}}
	l := obtain(t, hc, k, time.Minute)
	r1 := make(chan error, 1)
	go func() { r1 <- l.Refresh(t.Context(), 10*time.Minute) }()
	<-r1ran
	if err := l.Refresh(t.Context(), 2*time.Second); err != nil {
		t.Fatalf("2 s refresh: got %v, want nil", err)
	}
	close(r2done)
	if err := <-r1; err != nil {
		t.Fatalf("10-minute refresh: got %v, want nil", err)
	}
	pttl, err := c.PTTL(t.Context(), k).Result()
	if err != nil {
		t.Fatal(err)
	}
	if end, got := time.Now().Add(pttl), l.ValidUntil(); got.After(end.Add(50 * time.Millisecond)) {
		t.Fatalf("ValidUntil: got %v, after the key's end %v (PTTL %v)", got, end, pttl)
	}
}
