package redisholder_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/fence/redisholder"
)

// Bad input is refused with ErrInvalidArgument before any I/O (the client
// is of no server: a request would fail otherwise), never a panic.
func TestBadInput(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	var nilClient *redis.Client
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		name string
		call func() error
		want error
	}{
		{"nil client", func() error { _, err := redisholder.Obtain(t.Context(), nilClient, "k", time.Second, nil); return err }, redisholder.ErrInvalidArgument},
		{"untyped nil client", func() error { _, err := redisholder.Obtain(t.Context(), nil, "k", time.Second, nil); return err }, redisholder.ErrInvalidArgument},
		{"empty key", func() error { _, err := redisholder.Obtain(t.Context(), c, "", time.Second, nil); return err }, redisholder.ErrInvalidArgument},
		{"zero TTL", func() error { _, err := redisholder.Obtain(t.Context(), c, "k", 0, nil); return err }, redisholder.ErrInvalidArgument},
		// redislock sends whole milliseconds: SET PX 0, which Redis refuses.
		{"sub-millisecond TTL", func() error { _, err := redisholder.Obtain(t.Context(), c, "k", 999*time.Microsecond, nil); return err }, redisholder.ErrInvalidArgument},
		//lint:ignore SA1012 a nil context is what is tested
		{"nil context", func() error { _, err := redisholder.Obtain(nil, c, "k", time.Second, nil); return err }, redisholder.ErrInvalidArgument},
		{"cancelled context", func() error { _, err := redisholder.Obtain(cancelled, c, "k", time.Second, nil); return err }, context.Canceled},
		{"nil option", func() error { _, err := redisholder.Obtain(t.Context(), c, "k", time.Second, nil, nil); return err }, redisholder.ErrInvalidArgument},
		{"empty token key", func() error {
			_, err := redisholder.Obtain(t.Context(), c, "k", time.Second, nil, redisholder.WithTokenKey(""))
			return err
		}, redisholder.ErrInvalidArgument},
		{"empty issuer", func() error {
			_, err := redisholder.Obtain(t.Context(), c, "k", time.Second, nil, redisholder.WithIssuer(""))
			return err
		}, redisholder.ErrInvalidArgument},
		{"nil lock", func() error { _, err := redisholder.New(t.Context(), c, (*redislock.Lock)(nil)); return err }, redisholder.ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if errors.Is(tt.want, redisholder.ErrInvalidArgument) && !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want it to match fence.ErrInvalidArgument", err)
			}
		})
	}
}

// The counter is in its lock key's hash slot, except for a key without a
// tag that holds a "}" (documented: it needs WithTokenKey on a cluster).
func TestTokenKeySameSlot(t *testing.T) {
	for _, tt := range []struct {
		key, want string
		sameSlot  bool
	}{
		{"job-lock", "{job-lock}:fencelock-token", true},
		{"{job}:lock", "{job}:lock:fencelock-token", true},
		{"a}{b}", "a}{b}:fencelock-token", true},
		{"a{}b", "a{}b:fencelock-token", false},
	} {
		got := redisholder.TokenKey(tt.key)
		if got != tt.want {
			t.Errorf("TokenKey(%q): got %q, want %q", tt.key, got, tt.want)
		}
		if same := redisfence.Slot(got) == redisfence.Slot(tt.key); same != tt.sameSlot {
			t.Errorf("TokenKey(%q) in the key's slot: got %v, want %v", tt.key, same, tt.sameSlot)
		}
	}
}

// A Refresh refused for its arguments, or its context already ended,
// sends nothing and leaves Done open.
func TestRefreshBadInput(t *testing.T) {
	c := client(t)
	l := obtain(t, c, key(t), time.Minute)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		//lint:ignore SA1012 a nil context is what is tested
		{"nil context", l.Refresh(nil, time.Minute), redisholder.ErrInvalidArgument},
		{"zero TTL", l.Refresh(t.Context(), 0), redisholder.ErrInvalidArgument},
		// PEXPIRE 0, which deletes the key: the lock released, Done open.
		{"sub-millisecond TTL", l.Refresh(t.Context(), 999*time.Microsecond), redisholder.ErrInvalidArgument},
		{"cancelled context", l.Refresh(cancelled, time.Minute), context.Canceled},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	if closed(l.Done()) {
		t.Fatal("Done closed by a Refresh that sent nothing")
	}
}
