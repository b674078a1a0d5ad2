package pgadvisory_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Made WithSessionTimeout, a Lock cut off from its server closes Done at
// its deadline, when the server may end the session and give the lock to
// another, not a round trip later: the last ping's round trip (140 ms
// here) delays the next ping, and that ping's bound must not reach past
// the deadline.
func TestDoneByDeadlineWhenCutOff(t *testing.T) {
	t.Parallel() // it waits on timers
	cfg, _ := database(t)
	viaProxy, proxy := proxied(t, cfg)
	l := acquire(t, viaProxy, lockKey(), pgadvisory.WithSessionTimeout(400*time.Millisecond), pgadvisory.WithPingInterval(200*time.Millisecond))
	proxy.Delay(70 * time.Millisecond) // each way
	slow := time.Now().Add(400 * time.Millisecond)
	poll.Until(t, "a slow ping answered", func() bool { return closed(l.Done()) || l.ValidUntil().After(slow) })
	closedAt := make(chan time.Time, 1)
	go func() { <-l.Done(); closedAt <- time.Now() }()
	proxy.Cut()
	at := <-closedAt
	late := at.Sub(l.ValidUntil())
	t.Logf("Done closed %v after the deadline", late)
	if late > 70*time.Millisecond {
		t.Fatalf("Done closed %v after the deadline, want at it (%v)", late, l.Err())
	}
	proxy.Reset()
}

// A Release whose unlock gets no reply (the server cut off before the
// watch noticed) returns, with an error, however long its context: the
// session's end frees the lock, and the caller's defer must not hang.
func TestReleaseUnanswered(t *testing.T) {
	testenv.Long(t, "waits for the unlock's bound (5 s)")
	t.Parallel() // it waits on timers
	cfg, _ := database(t)
	viaProxy, proxy := proxied(t, cfg)
	l, err := pgadvisory.Acquire(t.Context(), viaProxy, lockKey(), pgadvisory.WithPingInterval(time.Hour)) // no ping notices
	if err != nil {
		t.Fatal(err)
	}
	proxy.CutReplies()
	released := make(chan error, 1)
	go func() { released <- l.Release(context.Background()) }()
	select {
	case err := <-released:
		if err == nil {
			t.Fatal("Release: got nil, want the unlock's error")
		}
	case <-time.After(15 * time.Second):
		proxy.Reset() // let the Release end, for goleak
		t.Fatalf("Release still waiting 15 s after the server stopped answering: %v", <-released)
	}
	proxy.Reset()
}

// proxied returns cfg through a netproxy, closed when t ends.
func proxied(t *testing.T, cfg *pgx.ConnConfig) (*pgx.ConnConfig, *netproxy.Proxy) {
	t.Helper()
	proxy, err := netproxy.Start(cfg.Host + ":" + itoa(cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	c := cfg.Copy()
	c.Host, c.Port = "127.0.0.1", port(t, proxy.Addr())
	c.Fallbacks = nil
	return c, proxy
}

// The server's idle_session_timeout is in whole milliseconds: a Lock's
// deadline counts the timeout the server got, never the fraction it
// dropped.
func TestSessionTimeoutWholeMilliseconds(t *testing.T) {
	cfg, _ := database(t)
	const d = 300*time.Millisecond + 999*time.Microsecond
	l := acquire(t, cfg, lockKey(), pgadvisory.WithSessionTimeout(d))
	if got, want := pgadvisory.SessionTimeoutOf(l), 300*time.Millisecond; got != want {
		t.Fatalf("the deadline's timeout: got %v, want %v, the server's", got, want)
	}
}

// A session that has an idle_session_timeout already (set by the role,
// the database or the connection's parameters) is a lease without
// WithSessionTimeout: the Lock pings often enough to keep it, and its
// deadline is the timeout's, not far off.
func TestServerSessionTimeoutIsALease(t *testing.T) {
	t.Parallel() // it waits on timers
	cfg, _ := database(t)
	withTimeout := cfg.Copy()
	withTimeout.RuntimeParams["idle_session_timeout"] = "600"
	start := time.Now()
	l := acquire(t, withTimeout, lockKey())
	if u := l.ValidUntil(); u.After(time.Now().Add(600 * time.Millisecond)) {
		t.Fatalf("ValidUntil: got %v after the start, want at most 600ms after the token's statement", u.Sub(start))
	}
	poll.Until(t, "the deadline moved 3 timeouts on", func() bool {
		return closed(l.Done()) || l.ValidUntil().After(start.Add(1800*time.Millisecond))
	})
	if closed(l.Done()) {
		t.Fatalf("Done closed: %v", l.Err())
	}
}
