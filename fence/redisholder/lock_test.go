package redisholder_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisholder"
)

// Each acquisition of a key gets a higher token than the one before, and
// a second client cannot obtain a held key.
func TestObtainTokensGrow(t *testing.T) {
	c, k := client(t), key(t)
	var last fence.Token
	for i := range 3 {
		l := obtain(t, c, k, time.Minute)
		if l.Token() <= last {
			t.Fatalf("acquisition %d: got token %d, want above %d", i, l.Token(), last)
		}
		last = l.Token()
		if _, err := redisholder.Obtain(t.Context(), client(t), k, time.Minute, nil); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("a second client's Obtain of a held key: got %v, want redislock.ErrNotObtained", err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !closed(l.Done()) {
			t.Fatal("Done open after Release")
		}
	}
}

// A client whose lock ran out (its key deleted, as expiry does) and was
// taken by another is issued no token: the script checks the key's value
// and increments in one step. The control issues without the check and
// gives the old holder a token above the new holder's, with which its
// late writes would win.
func TestTokenIssuedOnlyWhileHeld(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []redisholder.Option
		wantToken bool
	}{
		{"checked", nil, false},
		{"control: unchecked", []redisholder.Option{redisholder.WithUncheckedIssueForTest()}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, k := client(t), key(t)
			old, err := redislock.Obtain(t.Context(), c, k, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Del(t.Context(), k).Err(); err != nil { // its TTL ran out
				t.Fatal(err)
			}
			newer := obtain(t, c, k, time.Minute)
			l, err := redisholder.New(t.Context(), c, old, tt.opts...)
			if !tt.wantToken {
				if !errors.Is(err, redisholder.ErrNotHeld) || l != nil {
					t.Fatalf("got %v, %v; want ErrNotHeld", l, err)
				}
				if n := counter(t, c, k); n != int64(newer.Token()) {
					t.Fatalf("counter: got %d, want %d (the newer holder's)", n, newer.Token())
				}
				return
			}
			if err != nil || l.Token() <= newer.Token() {
				t.Fatalf("control: got %v, %v; want a token above the newer holder's %d", l, err, newer.Token())
			}
		})
	}
}

// New issues a token for a lock obtained with redislock, with a deadline
// from the TTL Redis reports.
func TestNewOfHeldLock(t *testing.T) {
	c, k := client(t), key(t)
	before := time.Now()
	rl, err := redislock.Obtain(t.Context(), c, k, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := redisholder.New(t.Context(), c, rl)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(t.Context()))
	after := time.Now()
	if l.Token() != 1 || l.Lock() != rl {
		t.Fatalf("got token %d, want 1", l.Token())
	}
	if u := l.ValidUntil(); u.After(after.Add(time.Minute)) || u.Before(before.Add(time.Minute-time.Second)) {
		t.Fatalf("ValidUntil: got %v after the call, want about a minute", u.Sub(after))
	}
}

// Done closes at the deadline, which is measured from before Obtain sent
// its request: never later than the key's end.
func TestDoneAtDeadline(t *testing.T) {
	t.Parallel() // it waits on timers
	const ttl = 300 * time.Millisecond
	c, k := client(t), key(t)
	before := time.Now()
	l := obtain(t, c, k, ttl)
	after := time.Now()
	until := l.ValidUntil()
	if until.Before(before.Add(ttl)) || until.After(after.Add(ttl)) {
		t.Fatalf("ValidUntil: got %v from before Obtain, want between %v and %v", until.Sub(before), ttl, after.Add(ttl).Sub(before))
	}
	select {
	case <-l.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done still open 30 s after the deadline")
	}
	if now := time.Now(); now.Before(until) {
		t.Fatalf("Done closed %v before the deadline", until.Sub(now))
	}
	g, err := fence.NewGuard(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check(); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Guard.Check: got %v, want ErrLockLost", err)
	}
	if err := l.Refresh(t.Context(), time.Minute); !errors.Is(err, redisholder.ErrEnded) {
		t.Fatalf("Refresh after Done: got %v, want ErrEnded", err)
	}
}

// A refresh moves the deadline and keeps Done open; one that finds the
// key gone, or cannot reach Redis, closes Done.
func TestRefresh(t *testing.T) {
	for _, tt := range []struct {
		name    string
		break_  func(t *testing.T, c *redis.Client, k string)
		wantErr error
	}{
		{"held", func(*testing.T, *redis.Client, string) {}, nil},
		{"key gone", func(t *testing.T, c *redis.Client, k string) {
			if err := c.Del(t.Context(), k).Err(); err != nil {
				t.Fatal(err)
			}
		}, redisholder.ErrNotHeld},
		{"client closed", func(t *testing.T, c *redis.Client, _ string) { c.Close() }, redis.ErrClosed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, k := client(t), key(t)
			l := obtain(t, c, k, time.Minute)
			first := l.ValidUntil()
			tt.break_(t, c, k)
			err := l.Refresh(t.Context(), 2*time.Minute)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Refresh: got %v, want %v", err, tt.wantErr)
			}
			if closed(l.Done()) != (tt.wantErr != nil) {
				t.Fatalf("Done closed: got %v, want %v", closed(l.Done()), tt.wantErr != nil)
			}
			if tt.wantErr == nil && !l.ValidUntil().After(first) {
				t.Fatalf("ValidUntil: got %v, want after %v", l.ValidUntil(), first)
			}
		})
	}
}

// A holder that does not know it lost the lock (paused, its Done not yet
// closed) writes with its token, and the store refuses it once the newer
// holder has written.
func TestGuardLateWriteRefused(t *testing.T) {
	c, k := client(t), key(t)
	a := obtain(t, c, k, time.Minute)
	if err := c.Del(t.Context(), k).Err(); err != nil { // A's TTL ran out
		t.Fatal(err)
	}
	b := obtain(t, c, k, time.Minute)
	store := fence.NewMemoryStore()
	ga, _ := fence.NewGuard(a)
	gb, _ := fence.NewGuard(b)
	if err := gb.Put(t.Context(), store, "report", []byte("B")); err != nil {
		t.Fatal(err)
	}
	if err := ga.Put(t.Context(), store, "report", []byte("A")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("A's late write: got %v, want ErrStale", err)
	}
	if r, _ := store.Get(t.Context(), "report"); string(r.Value) != "B" {
		t.Fatalf("got %q, want B's write", r.Value)
	}
}

// A Lock names its counter as its tokens' issuer, or the name given; a
// store that checks issuers refuses the other's tokens.
func TestIssuer(t *testing.T) {
	c, k := client(t), key(t)
	a := obtain(t, c, k, time.Minute)
	if want := "redis:" + redisholder.TokenKey(k); a.Issuer() != want {
		t.Fatalf("Issuer: got %q, want %q", a.Issuer(), want)
	}
	store := fence.NewMemoryStore()
	ga, _ := fence.NewGuard(a)
	if err := ga.Put(t.Context(), store, "report", []byte("A")); err != nil {
		t.Fatal(err)
	}
	other := obtain(t, c, key(t), time.Minute, redisholder.WithIssuer("redis-b"))
	if other.Issuer() != "redis-b" {
		t.Fatalf("Issuer: got %q, want redis-b", other.Issuer())
	}
	gb, _ := fence.NewGuard(other)
	if err := gb.Put(t.Context(), store, "report", []byte("B")); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("another issuer's write: got %v, want ErrIssuerMismatch", err)
	}
}
