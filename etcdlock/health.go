package etcdlock

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// LeaderHealth reports whether the lead functions of the [Client.Run] loops
// it is given to ([WithLeaderHealth]) stop when they should: the shape of
// client-go's leaderelection.HealthzAdaptor, for a liveness probe that
// restarts a leader stuck in its lead function. It is an [http.Handler]
// (serve it at /healthz) and has [LeaderHealth.Check] for a health
// framework of one's own.
//
// It is unhealthy while a lead function runs
//
//   - past its term's validity deadline ([Term.ValidUntil]) by more than
//     the tolerance ([WithValidityTolerance]): the lease may have expired
//     and another candidate may lead, but this process still acts as leader
//     (it did not notice, or did not act on, the loss);
//   - longer than the stop timeout ([WithStopTimeout]) after its context was
//     cancelled (its term ended: lost, broken, revoked, resigned; Run's
//     context ended; the Client closed): a wedged leader that ignores its
//     context.
//
// It is healthy when no lead function runs (a candidate, or a process not
// campaigning) and becomes healthy again as soon as the lead function
// returns. A process that cannot run at all (SIGSTOPped, frozen) cannot
// answer: the probe's timeout is then the signal.
//
// A LeaderHealth is safe for concurrent use, and may be given to several
// Runs (it is unhealthy when one of them is). The zero LeaderHealth is not
// usable (it reports unhealthy, see Check): create one with
// [NewLeaderHealth].
type LeaderHealth struct {
	o healthOptions

	mu    sync.Mutex // guards leads
	leads map[*leading]struct{}
}

var _ http.Handler = (*LeaderHealth)(nil)

// leading is one running lead function.
type leading struct {
	t         *Term
	cancelled time.Time // when its context was cancelled; zero until then
}

// HealthOption configures a [LeaderHealth].
type HealthOption interface {
	applyHealth(*healthOptions)
}

type healthOptions struct {
	tolerance   time.Duration
	stopTimeout time.Duration
}

type healthOptionFunc func(*healthOptions)

func (f healthOptionFunc) applyHealth(o *healthOptions) { f(o) }

// WithValidityTolerance sets how long a lead function may run past its
// term's validity deadline before [LeaderHealth] reports unhealthy. Choose
// more than lead takes to stop once its context is cancelled (the validity
// deadline passing cancels it). Default 10 s. Negative values make
// [NewLeaderHealth] fail.
func WithValidityTolerance(d time.Duration) HealthOption {
	return healthOptionFunc(func(o *healthOptions) { o.tolerance = d })
}

// WithStopTimeout sets how long a lead function may run after its context
// was cancelled before [LeaderHealth] reports unhealthy. Default 10 s.
// Non-positive values make [NewLeaderHealth] fail.
func WithStopTimeout(d time.Duration) HealthOption {
	return healthOptionFunc(func(o *healthOptions) { o.stopTimeout = d })
}

// NewLeaderHealth returns a LeaderHealth with no lead function running
// (healthy). It returns an error matching [ErrInvalidOption] for a nil or
// invalid option.
func NewLeaderHealth(opts ...HealthOption) (*LeaderHealth, error) {
	o := healthOptions{tolerance: 10 * time.Second, stopTimeout: 10 * time.Second}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil HealthOption", ErrInvalidOption)
		}
		opt.applyHealth(&o)
	}
	switch {
	case o.tolerance < 0:
		return nil, fmt.Errorf("%w: validity tolerance %v is negative", ErrInvalidOption, o.tolerance)
	case o.stopTimeout <= 0:
		return nil, fmt.Errorf("%w: stop timeout %v is not positive", ErrInvalidOption, o.stopTimeout)
	}
	return &LeaderHealth{o: o, leads: map[*leading]struct{}{}}, nil
}

// Check returns nil while healthy, and otherwise an error matching
// [ErrUnhealthy] that names the election, the term and the reason; on a
// nil or zero LeaderHealth, one matching [ErrInvalidArgument] (so that
// ServeHTTP answers 503).
func (h *LeaderHealth) Check() error {
	if h == nil || h.o.stopTimeout == 0 { // not made by NewLeaderHealth (an ignored error): not a healthy one
		return fmt.Errorf("%w: Check on a nil or zero LeaderHealth; create one with NewLeaderHealth", ErrInvalidArgument)
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.leads {
		if err := h.check(l, now); err != nil {
			return err
		}
	}
	return nil
}

func (h *LeaderHealth) check(l *leading, now time.Time) error {
	if !l.cancelled.IsZero() {
		if d := now.Sub(l.cancelled); d > h.o.stopTimeout {
			return h.unhealthy(l, "lead function still running %v after its context was cancelled (stop timeout %v)", d, h.o.stopTimeout)
		}
	}
	if d := now.Sub(l.t.ValidUntil()); d > h.o.tolerance {
		return h.unhealthy(l, "lead function still running %v past the term's validity deadline (tolerance %v)", d, h.o.tolerance)
	}
	return nil
}

func (h *LeaderHealth) unhealthy(l *leading, format string, d, limit time.Duration) error {
	return fmt.Errorf("%w: election %q, term %d: "+format, ErrUnhealthy, l.t.Name(), l.t.Token(), d.Round(time.Millisecond), limit)
}

// ServeHTTP answers 200 "ok" while healthy and 503 with the reason
// ([LeaderHealth.Check]'s error) otherwise, as text, for any method.
func (h *LeaderHealth) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.Check(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// track records that a lead function of term t, with context ctx, starts
// now. The returned function records that it returned; it may be called
// more than once. On a nil LeaderHealth (no WithLeaderHealth) it does
// nothing.
func (h *LeaderHealth) track(ctx context.Context, t *Term) (returned func()) {
	if h == nil {
		return func() {}
	}
	l := &leading{t: t}
	h.mu.Lock()
	h.leads[l] = struct{}{}
	h.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		l.cancelled = time.Now()
	})
	return func() {
		stop()
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.leads, l)
	}
}
