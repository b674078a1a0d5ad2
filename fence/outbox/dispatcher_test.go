package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// holder is a lock holder the test controls: lose closes Done; expire
// moves its validity deadline into the past, as a pause past the lease
// does.
type holder struct {
	token fence.Token
	done  chan struct{}
	once  sync.Once
	until atomic.Int64 // unix nanos; 0: valid
}

func newHolder(t fence.Token) *holder { return &holder{token: t, done: make(chan struct{})} }

func (h *holder) Token() fence.Token    { return h.token }
func (h *holder) Done() <-chan struct{} { return h.done }
func (h *holder) lose()                 { h.once.Do(func() { close(h.done) }) }
func (h *holder) expire()               { h.until.Store(time.Now().Add(-time.Second).UnixNano()) }
func (h *holder) ValidUntil() time.Time {
	if u := h.until.Load(); u != 0 {
		return time.Unix(0, u)
	}
	return time.Now().Add(time.Hour)
}

// recorder is a sender that records what it was sent, and fails as told.
type recorder struct {
	mu   sync.Mutex
	got  []string // keys, in order of delivery
	fail func(e outbox.Effect, n int) error
	n    map[string]int
}

func (r *recorder) Send(ctx context.Context, e outbox.Effect) error {
	r.mu.Lock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[e.Key()]++
	n := r.n[e.Key()]
	f := r.fail
	r.mu.Unlock()
	if f != nil {
		if err := f(e, n); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, e.Key())
	return nil
}

func (r *recorder) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func effect(res string, tok fence.Token, seq int64) outbox.Effect {
	return outbox.Effect{Resource: res, Token: tok, Seq: seq, Destination: "mail", Payload: []byte(res)}
}

func mustRecord(t *testing.T, m *outbox.MemoryLog, es ...outbox.Effect) {
	t.Helper()
	if err := m.Record(t.Context(), fence.Claim{Resource: es[0].Resource, Token: es[0].Token}, es...); err != nil {
		t.Fatalf("Record: got %v, want nil", err)
	}
}

// start runs d under h in the background; stop cancels it and returns
// Run's error, which ended also delivers once Run has returned.
func start(t *testing.T, d *outbox.Dispatcher, h fence.Holder) (stop func() error, ended <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan error, 1)
	finished := make(chan struct{})
	var err error
	go func() {
		err = d.Run(ctx, h, outbox.All)
		close(finished)
		ch <- err
	}()
	stop = func() error {
		cancel()
		<-finished
		return err
	}
	t.Cleanup(func() { stop() })
	return stop, ch
}

func newDispatcher(t *testing.T, m outbox.Log, s outbox.Sender, opts ...outbox.Option) *outbox.Dispatcher {
	t.Helper()
	opts = append([]outbox.Option{outbox.WithBackoff(time.Millisecond, 5*time.Millisecond), outbox.WithPollInterval(20 * time.Millisecond)}, opts...)
	d, err := outbox.NewDispatcher(m, s, opts...)
	if err != nil {
		t.Fatalf("NewDispatcher: %v", err)
	}
	return d
}

func waitPending(t *testing.T, m *outbox.MemoryLog, want int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d effects pending", want), func() bool {
		p, _ := m.Pending(t.Context(), outbox.All, nil, 1000)
		return len(p) == want
	})
}

func TestDispatcherDeliversInOrderPerResource(t *testing.T) {
	m := outbox.NewMemoryLog()
	var want = map[string][]string{}
	for i := range 20 {
		res := fmt.Sprintf("acct-%d", i%3)
		e := effect(res, fence.Token(10+i), int64(i))
		mustRecord(t, m, e)
		want[res] = append(want[res], e.Key())
	}
	s := &recorder{fail: func(e outbox.Effect, n int) error {
		if e.Seq%4 == 0 && n < 3 {
			return errors.New("receiver busy")
		}
		return nil
	}}
	stop, _ := start(t, newDispatcher(t, m, s, outbox.WithBatch(5)), newHolder(100))
	waitPending(t, m, 0)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: got %v, want context.Canceled", err)
	}
	got := map[string][]string{}
	for _, k := range s.delivered() {
		for res, keys := range want {
			if slices.Contains(keys, k) {
				got[res] = append(got[res], k)
			}
		}
	}
	for res := range want {
		if !slices.Equal(got[res], want[res]) {
			t.Errorf("%s: delivered %q, want %q", res, got[res], want[res])
		}
	}
}

func TestDispatcherParks(t *testing.T) {
	m := outbox.NewMemoryLog()
	bad, panics, flaky, after := effect("a", 5, 0), effect("b", 5, 0), effect("c", 5, 0), effect("a", 5, 1)
	mustRecord(t, m, bad, after)
	mustRecord(t, m, panics)
	mustRecord(t, m, flaky)
	s := &recorder{fail: func(e outbox.Effect, n int) error {
		switch e.Key() {
		case bad.Key():
			return outbox.Permanent(errors.New("400: no such user"))
		case panics.Key():
			panic("sender bug")
		case flaky.Key():
			return errors.New("503")
		}
		return nil
	}}
	var reported atomic.Int32
	d := newDispatcher(t, m, s, outbox.WithMaxAttempts(3), outbox.WithErrorHandler(func(e outbox.Effect, err error) {
		if errors.Is(err, outbox.ErrParked) {
			reported.Add(1)
		}
	}))
	stop, _ := start(t, d, newHolder(100))
	waitPending(t, m, 0)
	stop()
	parked, _ := m.Parked(t.Context(), outbox.All, 10)
	reasons := map[string]string{}
	for _, p := range parked {
		reasons[p.Effect.Key()] = fmt.Sprintf("%d %s", p.Attempts, p.Reason)
	}
	for k, want := range map[string]string{bad.Key(): "1 permanent: 400: no such user", panics.Key(): "sender panicked: sender bug", flaky.Key(): "3 after 3 attempts: 503"} {
		if !strings.Contains(reasons[k], want) {
			t.Errorf("parked %s: got %q, want it to contain %q", k, reasons[k], want)
		}
	}
	if got := s.delivered(); !slices.Equal(got, []string{after.Key()}) {
		t.Errorf("delivered: got %q, want only %s (behind a parked effect, not blocked by it)", got, after.Key())
	}
	if reported.Load() != 3 {
		t.Errorf("error handler saw %d parked effects, want 3", reported.Load())
	}
}

// TestDispatcherDeposed: a dispatcher whose lock a newer one took marks
// nothing and returns ErrStale; the newer one delivers the rest.
func TestDispatcherDeposed(t *testing.T) {
	m := outbox.NewMemoryLog()
	mustRecord(t, m, effect("a", 5, 0))
	gate := make(chan struct{})
	slow := &recorder{fail: func(outbox.Effect, int) error { <-gate; return nil }}
	_, ended := start(t, newDispatcher(t, m, slow), newHolder(100))
	poll.Until(t, "the old dispatcher sending", func() bool { slow.mu.Lock(); defer slow.mu.Unlock(); return len(slow.n) == 1 })
	fresh := &recorder{}
	stop2, _ := start(t, newDispatcher(t, m, fresh), newHolder(200))
	poll.Until(t, "the new dispatcher delivering", func() bool { return len(fresh.delivered()) == 1 })
	close(gate)
	select {
	case err := <-ended:
		if !errors.Is(err, fence.ErrStale) {
			t.Fatalf("old dispatcher's Run: got %v, want an error matching fence.ErrStale", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("old dispatcher still running 10 s after a newer one took over")
	}
	mustRecord(t, m, effect("a", 6, 0))
	waitPending(t, m, 0)
	stop2()
	if got := fresh.delivered(); len(got) != 2 {
		t.Fatalf("new dispatcher delivered %q, want both effects", got)
	}
}

// TestDispatcherPausedPastLease: a dispatcher whose validity deadline
// passed (a pause past its lease) sends nothing further and marks nothing.
func TestDispatcherPausedPastLease(t *testing.T) {
	for _, how := range []string{"deadline passed", "lock lost"} {
		t.Run(how, func(t *testing.T) {
			m := outbox.NewMemoryLog()
			mustRecord(t, m, effect("a", 5, 0), effect("a", 5, 1))
			h := newHolder(100)
			gate := make(chan struct{})
			s := &recorder{fail: func(e outbox.Effect, _ int) error {
				if e.Seq == 0 {
					<-gate
				}
				return nil
			}}
			_, ended := start(t, newDispatcher(t, m, s), h)
			poll.Until(t, "sending", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.n) == 1 })
			if how == "lock lost" {
				h.lose()
			} else {
				h.expire()
			}
			close(gate)
			err := <-ended
			if !errors.Is(err, fence.ErrLockLost) {
				t.Fatalf("Run: got %v, want an error matching fence.ErrLockLost", err)
			}
			if got := s.delivered(); len(got) > 1 {
				t.Fatalf("delivered %q after the lock was lost, want at most the one under way", got)
			}
			waitPending(t, m, 2) // nothing marked
		})
	}
}

func TestDispatcherWakesOnWatch(t *testing.T) {
	m := outbox.NewMemoryLog()
	s := &recorder{}
	stop, _ := start(t, newDispatcher(t, m, s, outbox.WithPollInterval(time.Hour)), newHolder(100))
	for i := range 3 {
		t0 := time.Now()
		mustRecord(t, m, effect("a", 5, int64(i)))
		poll.Until(t, "delivery", func() bool { return len(s.delivered()) == i+1 })
		t.Logf("effect %d delivered %v after it was recorded", i, time.Since(t0))
	}
	stop()
}

func TestDispatcherBadInput(t *testing.T) {
	m := outbox.NewMemoryLog()
	s := outbox.SenderFunc(func(context.Context, outbox.Effect) error { return nil })
	var nilLog *outbox.MemoryLog
	for name, f := range map[string]func() error{
		"nil log":    func() error { _, err := outbox.NewDispatcher(nilLog, s); return err },
		"nil sender": func() error { _, err := outbox.NewDispatcher(m, nil); return err },
		"nil option": func() error { _, err := outbox.NewDispatcher(m, s, nil); return err },
		"batch 0":    func() error { _, err := outbox.NewDispatcher(m, s, outbox.WithBatch(0)); return err },
		"empty name": func() error { _, err := outbox.NewDispatcher(m, s, outbox.WithName("")); return err },
		"backoff": func() error {
			_, err := outbox.NewDispatcher(m, s, outbox.WithBackoff(time.Second, time.Millisecond))
			return err
		},
		"timeout":    func() error { _, err := outbox.NewDispatcher(m, s, outbox.WithSendTimeout(0)); return err },
		"nil holder": func() error { return newDispatcher(t, m, s).Run(t.Context(), nil, outbox.All) },
		"token 0":    func() error { return newDispatcher(t, m, s).Run(t.Context(), newHolder(0), outbox.All) },
		"scope 3 of 2": func() error {
			return newDispatcher(t, m, s).Run(t.Context(), newHolder(1), outbox.Scope{Index: 3, Partitions: 2})
		},
		"nil context": func() error {
			//lint:ignore SA1012 the nil context is the point
			return newDispatcher(t, m, s).Run(nil, newHolder(1), outbox.All)
		},
		"effect no dest": func() error {
			return m.Record(t.Context(), fence.Claim{Resource: "a", Token: 1}, outbox.Effect{Resource: "a", Token: 1})
		},
		"effect token 0": func() error {
			return m.Record(t.Context(), fence.Claim{Resource: "a", Token: 1}, outbox.Effect{Resource: "a", Destination: "x"})
		},
		"effect no key": func() error {
			return m.Record(t.Context(), fence.Claim{Resource: "a", Token: 1}, outbox.Effect{Token: 1, Destination: "x"})
		},
	} {
		if err := f(); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error matching fence.ErrInvalidArgument", name, err)
		}
	}
}
