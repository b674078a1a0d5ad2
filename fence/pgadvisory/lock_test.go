package pgadvisory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// Each acquisition gets a higher token; another session's TryAcquire of
// a held key fails and takes no token; Release frees the key at once.
func TestTokensGrow(t *testing.T) {
	cfg, pool := database(t)
	key := lockKey()
	var last fence.Token
	for i := range 3 {
		l := acquire(t, cfg, key)
		if l.Token() <= last {
			t.Fatalf("acquisition %d: got token %d, want above %d", i, l.Token(), last)
		}
		last = l.Token()
		if _, err := pgadvisory.TryAcquire(t.Context(), cfg, key); !errors.Is(err, pgadvisory.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held key: got %v, want ErrNotAcquired", err)
		}
		var seq int64
		if err := pool.QueryRow(t.Context(), "SELECT last_value FROM fencelock_advisory_token").Scan(&seq); err != nil || seq != int64(last) {
			t.Fatalf("sequence: got %d (%v), want %d: the failed TryAcquire took a token", seq, err, last)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !closed(l.Done()) || !errors.Is(l.Err(), pgadvisory.ErrReleased) {
			t.Fatalf("after Release: Done closed %v, Err %v", closed(l.Done()), l.Err())
		}
	}
	l, err := pgadvisory.TryAcquire(t.Context(), cfg, key)
	if err != nil {
		t.Fatalf("TryAcquire after Release: got %v, want nil", err)
	}
	_ = l.Release(t.Context())
}

// Done closes when the server ends the session (pg_terminate_backend, as
// an administrator or idle_session_timeout would), and the next holder
// gets the key with a higher token.
func TestDoneWhenSessionEnds(t *testing.T) {
	cfg, pool := database(t)
	key := lockKey()
	a := acquire(t, cfg, key, pgadvisory.WithPingInterval(time.Hour)) // noticed without a ping
	if closed(a.Done()) {
		t.Fatal("Done closed while held")
	}
	var ended bool
	err := pool.QueryRow(t.Context(), "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = ($1::bigint & 4294967295)::oid AND granted", key).Scan(&ended)
	if err != nil || !ended {
		t.Fatalf("pg_terminate_backend: got %v, %v", ended, err)
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done still open 30 s after the session ended")
	}
	if !errors.Is(a.Err(), pgadvisory.ErrSessionLost) {
		t.Fatalf("Err: got %v, want ErrSessionLost", a.Err())
	}
	b := acquire(t, cfg, key)
	if b.Token() <= a.Token() {
		t.Fatalf("next holder's token: got %d, want above %d", b.Token(), a.Token())
	}
}

// Done closes when the server cannot be reached (a partition: the
// connection stays open and nothing arrives), by the ping's bound.
func TestDoneWhenServerUnreachable(t *testing.T) {
	t.Parallel() // it waits on timers
	cfg, _ := database(t)
	proxy, err := netproxy.Start(cfg.Host + ":" + itoa(cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := cfg.Copy()
	viaProxy.Host, viaProxy.Port = "127.0.0.1", port(t, proxy.Addr())
	viaProxy.Fallbacks = nil
	a := acquire(t, viaProxy, lockKey(), pgadvisory.WithPingInterval(100*time.Millisecond))
	proxy.Cut()
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done still open 30 s after the partition")
	}
	if !errors.Is(a.Err(), pgadvisory.ErrSessionLost) {
		t.Fatalf("Err: got %v, want ErrSessionLost", a.Err())
	}
	proxy.Reset()
}

// An Acquire whose context ends while it waits leaves nothing held or
// queued on the server: the lock's next holder after the first gets it
// at once.
func TestAcquireCancelledWait(t *testing.T) {
	t.Parallel() // it waits on timers
	cfg, pool := database(t)
	key := lockKey()
	a := acquire(t, cfg, key)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := pgadvisory.Acquire(ctx, cfg, key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held key, bounded: got %v, want DeadlineExceeded", err)
	}
	var waiting int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&waiting); err != nil || waiting != 0 {
		t.Fatalf("advisory lock waits left: got %d (%v), want 0", waiting, err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := pgadvisory.TryAcquire(t.Context(), cfg, key)
	if err != nil {
		t.Fatalf("TryAcquire after the holder's Release: got %v, want nil", err)
	}
	_ = b.Release(t.Context())
}

// A missing sequence fails Acquire and leaves the key free.
func TestNoSequence(t *testing.T) {
	cfg, _ := database(t)
	key := lockKey()
	_, err := pgadvisory.Acquire(t.Context(), cfg, key, pgadvisory.WithSequence(pgx.Identifier{"missing"}))
	if err == nil {
		t.Fatal("Acquire without its sequence: got nil, want an error")
	}
	acquire(t, cfg, key)
}

// A holder whose session was lost but that does not know it yet (its
// Done not yet closed) writes with its token, and the store refuses it
// once the newer holder has written.
func TestGuardLateWriteRefused(t *testing.T) {
	cfg, _ := database(t)
	key := lockKey()
	a := acquire(t, cfg, key)
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	ga, err := fence.NewGuard(fence.Holder(stillHeld{a}))
	if err != nil {
		t.Fatal(err)
	}
	b := acquire(t, cfg, key)
	gb, _ := fence.NewGuard(b)
	store := fence.NewMemoryStore()
	if err := gb.Put(t.Context(), store, "report", []byte("B")); err != nil {
		t.Fatal(err)
	}
	if err := ga.Put(t.Context(), store, "report", []byte("A")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("A's late write: got %v, want ErrStale", err)
	}
}

// stillHeld is a Lock whose Done has not been seen closed: a paused
// holder.
type stillHeld struct{ l *pgadvisory.Lock }

func (h stillHeld) Token() fence.Token    { return h.l.Token() }
func (h stillHeld) Done() <-chan struct{} { return make(chan struct{}) }

// A Lock names its database and sequence as its tokens' issuer, or the
// name given.
func TestIssuer(t *testing.T) {
	cfg, _ := database(t)
	a := acquire(t, cfg, lockKey())
	if want := "postgres:" + cfg.Database + ":public.fencelock_advisory_token"; a.Issuer() != want {
		t.Fatalf("Issuer: got %q, want %q", a.Issuer(), want)
	}
	b := acquire(t, cfg, lockKey(), pgadvisory.WithIssuer("pg-b"))
	if b.Issuer() != "pg-b" {
		t.Fatalf("Issuer: got %q, want pg-b", b.Issuer())
	}
}

// Made WithSessionTimeout, a live Lock's pings keep its session going past
// many timeouts, and move its deadline on.
func TestSessionTimeoutKeepsLiveSession(t *testing.T) {
	t.Parallel() // it waits on timers
	const timeout = 300 * time.Millisecond
	cfg, _ := database(t)
	start := time.Now()
	l := acquire(t, cfg, lockKey(), pgadvisory.WithSessionTimeout(timeout))
	if u := l.ValidUntil(); u.Before(start.Add(timeout)) || u.After(time.Now().Add(timeout)) {
		t.Fatalf("ValidUntil: got %v after the start, want about %v", u.Sub(start), timeout)
	}
	poll.Until(t, "the deadline moved 4 timeouts on", func() bool {
		return closed(l.Done()) || l.ValidUntil().After(start.Add(4*timeout))
	})
	if closed(l.Done()) {
		t.Fatalf("Done closed: %v", l.Err())
	}
}

// Without WithSessionTimeout a Lock has no deadline to keep: ValidUntil is
// far off.
func TestNoSessionTimeoutNoDeadline(t *testing.T) {
	cfg, _ := database(t)
	l := acquire(t, cfg, lockKey())
	if u := l.ValidUntil(); u.Before(time.Now().Add(24 * time.Hour)) {
		t.Fatalf("ValidUntil: got %v from now, want far off", time.Until(u))
	}
}
