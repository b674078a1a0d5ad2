package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// faultyLog is a MemoryLog whose calls fail as told: settle (called with
// the number of the Settle, from 1; set before use) may apply the write or not and return
// an error, as a store whose reply was lost does; check may fail Check;
// brokenWatch makes Watch return a channel that is closed at once, as a
// watch whose connection the server drops does.
type faultyLog struct {
	*outbox.MemoryLog
	settle      func(n int) (apply bool, err error)
	check       func(n int) error
	brokenWatch bool
	loseSettles atomic.Bool // while true, each Settle is lost: not applied, its outcome unknown

	settles, checks, pendings, watches atomic.Int32
	mu                                 sync.Mutex // guards stale
	stale                              []outbox.Effect
}

var (
	errReplyLost   = fmt.Errorf("connection reset: %w", fence.ErrUnknownOutcome)
	errUnreachable = errors.New("dial tcp: connection refused")
)

func (f *faultyLog) Settle(ctx context.Context, by fence.Claim, done []outbox.Settled) error {
	n := int(f.settles.Add(1))
	if f.loseSettles.Load() {
		return errReplyLost
	}
	if f.settle == nil {
		return f.MemoryLog.Settle(ctx, by, done)
	}
	apply, err := f.settle(n)
	if apply {
		if aerr := f.MemoryLog.Settle(ctx, by, done); aerr != nil {
			return aerr
		}
	}
	return err
}

func (f *faultyLog) Pending(ctx context.Context, scope outbox.Scope, skip []string, limit int) ([]outbox.Effect, error) {
	f.pendings.Add(1)
	es, err := f.MemoryLog.Pending(ctx, scope, skip, limit)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stale != nil { // a read from a replica that lags: what was pending before
		es, f.stale = f.stale, nil
	}
	return es, err
}

func (f *faultyLog) Check(ctx context.Context, scope outbox.Scope) error {
	n := int(f.checks.Add(1))
	if f.check != nil {
		return f.check(n)
	}
	return nil
}

func (f *faultyLog) Watch(ctx context.Context, scope outbox.Scope) (<-chan struct{}, error) {
	f.watches.Add(1)
	if f.brokenWatch {
		ch := make(chan struct{})
		close(ch)
		return ch, nil
	}
	return f.MemoryLog.Watch(ctx, scope)
}

// TestDispatcherTakeoverFaults: a dispatcher whose takeover meets a
// transient failure (the Settle's reply lost, whether or not it landed;
// the store unreachable; Check unreachable) rides it out, as Run's doc
// promises of failures to mark the log, and delivers. A store that
// refuses what a dispatcher needs still ends Run at start (the control).
func TestDispatcherTakeoverFaults(t *testing.T) {
	once := func(err error, apply bool) func(int) (bool, error) {
		return func(n int) (bool, error) {
			if n == 1 {
				return apply, err
			}
			return true, nil
		}
	}
	tests := []struct {
		name   string
		settle func(int) (bool, error)
		check  func(int) error
	}{
		{name: "takeover landed, reply lost", settle: once(errReplyLost, true)},
		{name: "takeover lost", settle: once(errReplyLost, false)},
		{name: "store unreachable", settle: once(errUnreachable, false)},
		{name: "check unreachable", check: func(n int) error {
			if n == 1 {
				return errUnreachable
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &faultyLog{MemoryLog: outbox.NewMemoryLog(), settle: tt.settle, check: tt.check}
			mustRecord(t, m.MemoryLog, effect("a", 5, 0))
			s := &recorder{}
			stop, ended := start(t, newDispatcher(t, m, s), newHolder(100))
			poll.Until(t, "delivery, or Run's end", func() bool { return len(s.delivered()) == 1 || len(ended) == 1 })
			if len(ended) == 1 {
				t.Fatalf("Run: got %v at start, want the failure ridden out", <-ended)
			}
			waitPending(t, m.MemoryLog, 0)
			stop()
		})
	}
	t.Run("control: not permitted", func(t *testing.T) {
		m := &faultyLog{MemoryLog: outbox.NewMemoryLog(), check: func(int) error {
			return fmt.Errorf("%w: role lacks UPDATE", outbox.ErrNotPermitted)
		}}
		err := newDispatcher(t, m, &recorder{}).Run(t.Context(), newHolder(100), outbox.All)
		if !errors.Is(err, outbox.ErrNotPermitted) {
			t.Fatalf("Run: got %v, want an error matching ErrNotPermitted", err)
		}
	})
}

// TestDispatcherSettleFaults: a round's Settle whose reply is lost, having
// landed or not, is retried by the next round: every effect ends
// delivered and marked, and the one sent but not marked is sent again
// (the receiver deduplicates). A Pending read that is stale (effects
// settled since) sends again what was settled, and marks nothing twice.
func TestDispatcherSettleFaults(t *testing.T) {
	for _, apply := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed %v", apply), func(t *testing.T) {
			m := &faultyLog{MemoryLog: outbox.NewMemoryLog(), settle: func(n int) (bool, error) {
				if n == 2 { // the first round's, after the takeover
					return apply, errReplyLost
				}
				return true, nil
			}}
			mustRecord(t, m.MemoryLog, effect("a", 5, 0), effect("a", 5, 1))
			s := &recorder{}
			stop, _ := start(t, newDispatcher(t, m, s), newHolder(100))
			waitPending(t, m.MemoryLog, 0)
			mustRecord(t, m.MemoryLog, effect("a", 6, 0))
			waitPending(t, m.MemoryLog, 0)
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: got %v, want context.Canceled", err)
			}
			want := 3
			if !apply {
				want = 5 // the first two again
			}
			if got := s.delivered(); len(got) != want {
				t.Fatalf("delivered %q, want %d deliveries", got, want)
			}
		})
	}
	t.Run("stale read", func(t *testing.T) {
		m := &faultyLog{MemoryLog: outbox.NewMemoryLog()}
		e := effect("a", 5, 0)
		mustRecord(t, m.MemoryLog, e)
		s := &recorder{}
		stop, _ := start(t, newDispatcher(t, m, s), newHolder(100))
		waitPending(t, m.MemoryLog, 0)
		m.mu.Lock()
		m.stale = []outbox.Effect{e}
		m.mu.Unlock()
		mustRecord(t, m.MemoryLog, effect("a", 6, 0))
		poll.Until(t, "the stale read's redelivery and the new effect", func() bool { return len(s.delivered()) == 3 })
		waitPending(t, m.MemoryLog, 0)
		stop()
		if p, _ := m.Parked(t.Context(), outbox.All, 10); len(p) != 0 {
			t.Fatalf("parked %v, want none", p)
		}
	})
}

// TestDispatcherBrokenWatch: a log whose watch breaks as soon as it is
// made (a server that drops the listening connection) leaves the
// dispatcher polling every WithPollInterval, as Watcher's doc says, not
// reading the log and watching again in a tight loop (which made some
// 200,000 reads in the half second before run.go's idle waited out the
// interval).
func TestDispatcherBrokenWatch(t *testing.T) {
	const poll, span = 50 * time.Millisecond, 500 * time.Millisecond
	m := &faultyLog{MemoryLog: outbox.NewMemoryLog(), brokenWatch: true}
	stop, _ := start(t, newDispatcher(t, m, &recorder{}, outbox.WithPollInterval(poll)), newHolder(100))
	idle := time.NewTimer(span) // the count over a span is the point, no condition to wait for
	<-idle.C
	stop()
	limit := int32(2*span/poll + 5)
	if n := m.pendings.Load(); n > limit {
		t.Fatalf("%d Pending reads and %d Watch calls in %v with a %v poll, want at most %d reads", n, m.watches.Load(), span, poll, limit)
	}
	t.Logf("%d Pending reads, %d Watch calls in %v", m.pendings.Load(), m.watches.Load(), span)
}
