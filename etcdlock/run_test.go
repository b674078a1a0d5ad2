package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

type termStart struct {
	token fence.Token
	ctx   context.Context
}

// runInBackground runs c.Run and reports each term it leads on the
// returned channel; lead waits for its context to end, then returns
// leadErr.
func runInBackground(t *testing.T, ctx context.Context, c *etcdlock.Client, name string, opts ...etcdlock.RunOption) (<-chan termStart, <-chan error) {
	t.Helper()
	starts := make(chan termStart, 16)
	result := make(chan error, 1)
	go func() {
		result <- c.Run(ctx, name, "v", func(tctx context.Context, term *etcdlock.Term) error {
			starts <- termStart{term.Token(), tctx}
			<-tctx.Done()
			return tctx.Err()
		}, opts...)
	}()
	return starts, result
}

func nextTerm(t *testing.T, starts <-chan termStart, what string) termStart {
	t.Helper()
	select {
	case s := <-starts:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no term after 10s", what)
		return termStart{}
	}
}

func TestRunHandsOverWhenLeaderStops(t *testing.T) {
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	actx, astop := context.WithCancel(context.Background())
	defer astop()
	aStarts, aDone := runInBackground(t, actx, a, "run")
	first := nextTerm(t, aStarts, "a")
	bctx, bstop := context.WithCancel(context.Background())
	defer bstop()
	bStarts, bDone := runInBackground(t, bctx, b, "run")
	select {
	case s := <-bStarts:
		t.Fatalf("b leads (token %d) while a does", s.token)
	case <-time.After(100 * time.Millisecond):
	}
	astop()
	waitClosed(t, first.ctx.Done(), time.Second, "a's term context after its Run was stopped")
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's Run: got %v, want context.Canceled", err)
	}
	second := nextTerm(t, bStarts, "b")
	if second.token <= first.token {
		t.Fatalf("b's token %d, want > a's %d", second.token, first.token)
	}
	bstop()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("b's Run: got %v, want context.Canceled", err)
	}
	if ks := keys(t, cli, keysOf(t).Elections()); len(ks) != 0 {
		t.Fatalf("keys after both Runs ended: got %v, want none", ks)
	}
}

// A term lost while lead runs, by a deletion of its key or a revoke of its
// lease (the session's end), cancels lead's context with the loss as its
// cause, and Run campaigns again (on a new session after a revoke).
func TestRunCancelsTermContextOnLoss(t *testing.T) {
	tests := []struct {
		name  string
		lose  func(cli *clientv3.Client, leader etcdlock.Entry) error
		cause error
	}{
		{"key deleted", func(cli *clientv3.Client, leader etcdlock.Entry) error {
			_, err := cli.Delete(t.Context(), leader.Key)
			return err
		}, etcdlock.ErrKeyDeleted},
		{"lease revoked", func(cli *clientv3.Client, leader etcdlock.Entry) error {
			_, err := cli.Revoke(t.Context(), leader.Lease)
			return err
		}, etcdlock.ErrLeaseExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := etcdClient(t)
			c := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			starts, done := runInBackground(t, ctx, c, "loss")
			first := nextTerm(t, starts, "first term")
			if err := tt.lose(cli, mustLeader(t, c, "loss")); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, first.ctx.Done(), 3*time.Second, "term context after the loss")
			if cause := context.Cause(first.ctx); !errors.Is(cause, tt.cause) {
				t.Fatalf("term context's cause: got %v, want %v", cause, tt.cause)
			}
			second := nextTerm(t, starts, "term after the loss")
			if second.token <= first.token {
				t.Fatalf("next token %d, want > %d", second.token, first.token)
			}
			stop()
			<-done
		})
	}
}

func TestRunPanicLeavesNoLeaderKey(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		c.Run(t.Context(), "panic", "", func(context.Context, *etcdlock.Term) error { panic("boom") })
	}()
	select {
	case p := <-got:
		if p != "boom" {
			t.Fatalf("recovered: got %v, want boom", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not panic")
	}
	if ks := keys(t, cli, keysOf(t).Elections()); len(ks) != 0 {
		t.Fatalf("keys after the panic: got %v, want none", ks)
	}
}

func TestRunErrors(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	boom := errors.New("boom")
	err := c.Run(t.Context(), "err", "", func(context.Context, *etcdlock.Term) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Run: got %v, want lead's error", err)
	}

	var handled []error
	ctx, cancel := context.WithCancel(t.Context())
	var terms []fence.Token
	err = c.Run(ctx, "err", "", func(_ context.Context, term *etcdlock.Term) error {
		terms = append(terms, term.Token())
		if len(terms) == 3 {
			cancel()
		}
		return boom
	}, etcdlock.WithErrorHandler(func(err error) { handled = append(handled, err) }))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a handler: got %v, want context.Canceled", err)
	}
	if len(terms) != 3 || len(handled) != 2 || !errors.Is(handled[0], boom) {
		t.Fatalf("Run with a handler: %d terms, handled %v; want 3 terms, 2 errors matching boom", len(terms), handled)
	}
	if terms[1] <= terms[0] || terms[2] <= terms[1] {
		t.Fatalf("terms: got tokens %v, want increasing", terms)
	}

	c.Close(t.Context())
	if err := c.Run(t.Context(), "err", "", func(context.Context, *etcdlock.Term) error { return nil }); !errors.Is(err, etcdlock.ErrClosed) {
		t.Fatalf("Run on a closed Client: got %v, want ErrClosed", err)
	}
}
