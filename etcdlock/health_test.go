package etcdlock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

func newHealth(t *testing.T, opts ...etcdlock.HealthOption) *etcdlock.LeaderHealth {
	t.Helper()
	h, err := etcdlock.NewLeaderHealth(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// probe asks h as an orchestrator's probe would, and returns the status
// and the body.
func probe(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// waitStatus probes h until it answers code, failing the test after
// within; it returns when it did and the body.
func waitStatus(t *testing.T, h http.Handler, code int, within time.Duration) (time.Time, string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, body := probe(t, h)
		if got == code {
			return time.Now(), body
		}
		if time.Now().After(deadline) {
			t.Fatalf("health: got %d %q after %v, want %d", got, body, within, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type leadStart struct {
	term *etcdlock.Term
	ctx  context.Context
}

// stubbornLeader runs c.Run with h until the test ends; its lead function
// reports each term on the returned channel, then runs until its context
// is cancelled, or, unless obeys, until release is called and its context
// is cancelled.
func stubbornLeader(t *testing.T, c *etcdlock.Client, name string, h *etcdlock.LeaderHealth, obeys bool) (starts <-chan leadStart, release func()) {
	t.Helper()
	ch := make(chan leadStart, 16)
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	if obeys {
		release()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, name, "v", func(tctx context.Context, term *etcdlock.Term) error {
			ch <- leadStart{term, tctx}
			<-released
			<-tctx.Done()
			return nil
		}, etcdlock.WithLeaderHealth(h))
	}()
	t.Cleanup(func() {
		release()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: got %v, want context.Canceled", err)
		}
	})
	return ch, release
}

func nextLead(t *testing.T, starts <-chan leadStart, what string) leadStart {
	t.Helper()
	select {
	case s := <-starts:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no term after 10s", what)
		return leadStart{}
	}
}

func TestLeaderHealthOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []etcdlock.HealthOption
		ok   bool
	}{
		{"defaults", nil, true},
		{"zero tolerance", []etcdlock.HealthOption{etcdlock.WithValidityTolerance(0)}, true},
		{"negative tolerance", []etcdlock.HealthOption{etcdlock.WithValidityTolerance(-time.Second)}, false},
		{"zero stop timeout", []etcdlock.HealthOption{etcdlock.WithStopTimeout(0)}, false},
		{"negative stop timeout", []etcdlock.HealthOption{etcdlock.WithStopTimeout(-time.Second)}, false},
		{"nil option", []etcdlock.HealthOption{nil}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := etcdlock.NewLeaderHealth(tt.opts...)
			if tt.ok {
				if err != nil || h == nil {
					t.Fatalf("NewLeaderHealth: got %v, %v, want a LeaderHealth", h, err)
				}
				return
			}
			if !errors.Is(err, etcdlock.ErrInvalidOption) {
				t.Fatalf("NewLeaderHealth: got %v, want ErrInvalidOption", err)
			}
		})
	}
	c := newLocker(t, etcdClient(t))
	err := c.Run(t.Context(), "health", "", func(context.Context, *etcdlock.Term) error { return nil }, etcdlock.WithLeaderHealth(nil))
	if !errors.Is(err, etcdlock.ErrInvalidOption) {
		t.Fatalf("Run with a nil LeaderHealth: got %v, want ErrInvalidOption", err)
	}
}

// A leader whose term lasts, and a candidate waiting behind it, are
// healthy; the leader stays healthy past its first validity deadline (its
// keepalives move it on).
func TestLeaderHealthHealthyLeaderAndCandidate(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	lh, ch := newHealth(t, etcdlock.WithValidityTolerance(0)), newHealth(t)
	starts, _ := stubbornLeader(t, newLocker(t, cli), "healthy", lh, true)
	first := nextLead(t, starts, "leader")
	candidate, _ := stubbornLeader(t, newLocker(t, cli), "healthy", ch, true)
	time.Sleep(3 * time.Second) // past the leader's first validity deadline (TTL 1 s, granted 2 s at most)
	for name, h := range map[string]*etcdlock.LeaderHealth{"leader": lh, "candidate": ch} {
		if code, body := probe(t, h); code != http.StatusOK || body != "ok\n" {
			t.Errorf("%s: got %d %q, want 200 \"ok\\n\"", name, code, body)
		}
	}
	select {
	case s := <-candidate:
		t.Fatalf("the candidate leads (token %d) while the leader's term (token %d) lasts", s.term.Token(), first.term.Token())
	default:
	}
}

// A lead function that ignores its context after its term ended (broken,
// or its lease revoked) makes the health 503 once the stop timeout has
// passed since, and 200 again once it returns. The control: one that stops
// stays healthy.
func TestLeaderHealthWedgedLeader(t *testing.T) {
	testenv.Long(t, "it waits out a wedged leader")
	t.Parallel()
	const stopTimeout = 500 * time.Millisecond
	tests := []struct {
		name string
		end  func(t *testing.T, cli *clientv3.Client, c *etcdlock.Client, leader etcdlock.Entry) error
	}{
		{"broken", func(t *testing.T, _ *clientv3.Client, c *etcdlock.Client, e etcdlock.Entry) error {
			_, err := c.BreakElection(t.Context(), "wedged", e.Token)
			return err
		}},
		{"lease revoked", func(t *testing.T, cli *clientv3.Client, _ *etcdlock.Client, e etcdlock.Entry) error {
			_, err := cli.Revoke(t.Context(), e.Lease)
			return err
		}},
	}
	for _, tt := range tests {
		for _, obeys := range []bool{false, true} {
			name := tt.name + "/wedged"
			if obeys {
				name = tt.name + "/control"
			}
			t.Run(name, func(t *testing.T) {
				cli := etcdClient(t)
				c := newLocker(t, cli, etcdlock.WithTTL(5*time.Second))
				h := newHealth(t, etcdlock.WithStopTimeout(stopTimeout), etcdlock.WithValidityTolerance(time.Minute))
				starts, release := stubbornLeader(t, c, "wedged", h, obeys)
				first := nextLead(t, starts, "first term")
				if err := tt.end(t, cli, c, mustLeader(t, c, "wedged")); err != nil {
					t.Fatal(err)
				}
				ended := waitClosed(t, first.ctx.Done(), 3*time.Second, "term context after its end")
				if obeys {
					nextLead(t, starts, "term after the end")
					time.Sleep(2 * stopTimeout)
					if code, body := probe(t, h); code != http.StatusOK {
						t.Fatalf("control: got %d %q, want 200", code, body)
					}
					return
				}
				if code, body := probe(t, h); code != http.StatusOK {
					t.Fatalf("within the stop timeout: got %d %q, want 200", code, body)
				}
				at, body := waitStatus(t, h, http.StatusServiceUnavailable, 3*time.Second)
				if took := at.Sub(ended); took < stopTimeout-50*time.Millisecond {
					t.Errorf("503 %v after the term ended, want >= stop timeout %v", took, stopTimeout)
				}
				if !strings.Contains(body, "after its context was cancelled") || !strings.Contains(body, `"wedged"`) {
					t.Errorf("body: got %q, want the election and the reason", body)
				}
				release()
				waitStatus(t, h, http.StatusOK, 3*time.Second)
			})
		}
	}
}

// A leader cut off from etcd (as one that was paused, and resumed after
// its lease expired, is) whose lead function goes on, ignoring its
// context, makes the health 503 once the validity deadline has passed by
// the tolerance (the stop timeout is far away), and 200 again once it
// returns. The control: one that stops stays healthy.
func TestLeaderHealthPartitionedLeader(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	t.Parallel()
	const tolerance = 300 * time.Millisecond
	for _, obeys := range []bool{false, true} {
		name := "wedged"
		if obeys {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			pcli, proxy := proxied(t)
			c := newLocker(t, pcli, etcdlock.WithTTL(2*time.Second), etcdlock.WithCleanupTimeout(time.Second))
			h := newHealth(t, etcdlock.WithValidityTolerance(tolerance), etcdlock.WithStopTimeout(time.Minute))
			starts, release := stubbornLeader(t, c, "paused", h, obeys)
			first := nextLead(t, starts, "first term")
			proxy.Cut()
			t.Cleanup(proxy.Heal) // runs before the Run is stopped and the Client closed
			waitClosed(t, first.ctx.Done(), 5*time.Second, "term context on a cut link")
			if cause := context.Cause(first.ctx); !errors.Is(cause, etcdlock.ErrValidityExpired) {
				t.Fatalf("term context's cause: got %v, want ErrValidityExpired", cause)
			}
			if obeys {
				time.Sleep(3 * tolerance)
				if code, body := probe(t, h); code != http.StatusOK {
					t.Fatalf("control: got %d %q, want 200", code, body)
				}
				return
			}
			at, body := waitStatus(t, h, http.StatusServiceUnavailable, 3*time.Second)
			if late := at.Sub(first.term.ValidUntil()); late < tolerance {
				t.Errorf("503 %v past the validity deadline, want >= tolerance %v", late, tolerance)
			}
			if !strings.Contains(body, "past the term's validity deadline") {
				t.Errorf("body: got %q, want the validity deadline as the reason", body)
			}
			release()
			waitStatus(t, h, http.StatusOK, 3*time.Second)
		})
	}
}
