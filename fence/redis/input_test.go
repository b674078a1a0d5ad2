package redisfence_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// Bad input gets a clear error before any I/O, never a panic.
func TestBadInput(t *testing.T) {
	c := client(t)
	var nilClient *redis.Client
	if _, err := redisfence.New(nilClient, "p:"); !errors.Is(err, redisfence.ErrInvalidArgument) || !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("New with a typed nil client: got %v", err)
	}
	if _, err := redisfence.New(nil, "p:"); !errors.Is(err, redisfence.ErrInvalidArgument) {
		t.Fatalf("New with a nil client: got %v", err)
	}
	if _, err := redisfence.New(c, ""); !errors.Is(err, redisfence.ErrInvalidArgument) {
		t.Fatalf("New with an empty prefix: got %v", err)
	}
	for _, opt := range []redisfence.Option{nil, redisfence.WithMeterProvider(nil), redisfence.WithTracerProvider(nil)} {
		if _, err := redisfence.New(c, "p:", opt); !errors.Is(err, redisfence.ErrInvalidOption) {
			t.Fatalf("New with a nil option or provider: got %v", err)
		}
		if _, err := redisfence.NewHash(c, "fence", opt); !errors.Is(err, redisfence.ErrInvalidOption) {
			t.Fatalf("NewHash with a nil option or provider: got %v", err)
		}
	}
	if _, err := redisfence.NewHash(nilClient, "fence"); !errors.Is(err, redisfence.ErrInvalidArgument) {
		t.Fatalf("NewHash with a typed nil client: got %v", err)
	}
	if _, err := redisfence.NewHash(c, ""); !errors.Is(err, redisfence.ErrInvalidArgument) {
		t.Fatalf("NewHash with an empty token field: got %v", err)
	}

	s := mustNew(t, c, prefix(t))
	h := mustHash(t, c)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	inc := func(fence.Record) ([]byte, error) { return nil, nil }
	hinc := func(map[string]string) (map[string]string, error) { return nil, nil }
	many := map[string]string{}
	for i := range redisfence.MaxFields + 1 {
		many[strconv.Itoa(i)] = "v"
	}
	var zero redisfence.Store
	var zeroHash redisfence.Hash
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"Put empty key", s.Put(t.Context(), "", 1, nil), fence.ErrInvalidKey},
		{"Put token 0", s.Put(t.Context(), "k", 0, nil), fence.ErrInvalidToken},
		{"Put token -1", s.Put(t.Context(), "k", -1, nil), fence.ErrInvalidToken},
		{"Put nil ctx", s.Put(nilCtx, "k", 1, nil), redisfence.ErrInvalidArgument},
		{"Put cancelled", s.Put(cancelled, "k", 1, nil), context.Canceled},
		{"Put zero Store", zero.Put(t.Context(), "k", 1, nil), redisfence.ErrInvalidArgument},
		{"Delete token 0", s.Delete(t.Context(), "k", 0), fence.ErrInvalidToken},
		{"Get empty key", second(s.Get(t.Context(), "")), fence.ErrInvalidKey},
		{"Get nil ctx", second(s.Get(nilCtx, "k")), redisfence.ErrInvalidArgument},
		{"GetForUpdate token 0", second(s.GetForUpdate(t.Context(), "k", 0)), fence.ErrInvalidToken},
		{"Update nil fn", s.Update(t.Context(), "k", 1, nil), fence.ErrInvalidArgument},
		{"Update cancelled", s.Update(cancelled, "k", 1, inc), context.Canceled},
		{"Hash.Set empty key", h.Set(t.Context(), "", 1, map[string]string{"a": "b"}), fence.ErrInvalidKey},
		{"Hash.Set token 0", h.Set(t.Context(), "k", 0, map[string]string{"a": "b"}), fence.ErrInvalidToken},
		{"Hash.Set no fields", h.Set(t.Context(), "k", 1, nil), redisfence.ErrInvalidArgument},
		{"Hash.Set the token field", h.Set(t.Context(), "k", 1, map[string]string{"fence": "1"}), redisfence.ErrInvalidArgument},
		{"Hash.Set too many fields", h.Set(t.Context(), "k", 1, many), redisfence.ErrInvalidArgument},
		{"Hash.Set nil ctx", h.Set(nilCtx, "k", 1, map[string]string{"a": "b"}), redisfence.ErrInvalidArgument},
		{"Hash.Set zero Hash", zeroHash.Set(t.Context(), "k", 1, map[string]string{"a": "b"}), redisfence.ErrInvalidArgument},
		{"Hash.GetForUpdate the token field", second(h.GetForUpdate(t.Context(), "k", 1, "fence")), redisfence.ErrInvalidArgument},
		{"Hash.GetForUpdate cancelled", second(h.GetForUpdate(cancelled, "k", 1)), context.Canceled},
		{"Hash.Update nil fn", h.Update(t.Context(), "k", 1, nil, nil), fence.ErrInvalidArgument},
		{"Hash.Update token -1", h.Update(t.Context(), "k", -1, nil, hinc), fence.ErrInvalidToken},
		{"Hash.Update fn writes the token field", h.Update(t.Context(), prefix(t)+"k", 1, nil, func(map[string]string) (map[string]string, error) {
			return map[string]string{"fence": "9"}, nil
		}), redisfence.ErrInvalidArgument},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	if n, err := c.Exists(t.Context(), s.Key("k"), "k").Result(); err != nil || n != 0 {
		t.Fatalf("keys written by refused calls: %d, %v", n, err)
	}
}

func second[T any](_ T, err error) error { return err }

// A Store's key that something else wrote is reported, and left alone.
func TestCorrupt(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	if err := c.Set(t.Context(), s.Key("str"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "str", 5, []byte("v")); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("Put over a string key: got %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(t.Context(), "str"); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("Get of a string key: got %v, want ErrCorrupt", err)
	}
	if err := c.HSet(t.Context(), s.Key("h"), "floor", "99", "token", "x", "value", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "h", 5, []byte("v")); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("Put over a floor of 99: got %v, want ErrCorrupt", err)
	}
	if _, err := s.GetForUpdate(t.Context(), "h", 5); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("GetForUpdate over a floor of 99: got %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(t.Context(), "h"); !errors.Is(err, redisfence.ErrCorrupt) {
		t.Fatalf("Get of a token x: got %v, want ErrCorrupt", err)
	}
	if v := field(t, c, s.Key("h"), "floor"); v != "99" {
		t.Fatalf("floor: got %q, want 99 (nothing changed)", v)
	}
}

// Delete keeps the floor: the record is gone, a stale write is refused.
func TestDelete(t *testing.T) {
	s := newStore(t)
	mustPut(t, s, "k", 5, "a")
	if err := s.Delete(t.Context(), "k", 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Delete(4) after 5: got %v", err)
	}
	if err := s.Delete(t.Context(), "k", 6); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if err := s.Put(t.Context(), "k", 5, []byte("late")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(5) after Delete(6): got %v, want ErrStale", err)
	}
	mustPut(t, s, "k", 6, "b")
	fencewant.Record(t, s, "k", 6, "b")
}
