package redisfence_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

// TestMain starts the redis-server every test in this package shares.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Main(m)) }

// client returns a client of the shared server, closed when the test
// ends: each one is like a separate process. Its retries are go-redis's
// default.
func client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	return redistest.New(t).Client(t, opts...)
}

// prefix returns a prefix no other test or run uses.
func prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fencelock-test:" + strings.ReplaceAll(t.Name(), "/", "-") + ":" + hex.EncodeToString(b[:]) + ":"
}

func mustNew(t testing.TB, c redisfence.Client, prefix string, opts ...redisfence.Option) *redisfence.Store {
	t.Helper()
	s, err := redisfence.New(c, prefix, opts...)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return s
}

// newStore returns a store under a fresh prefix with a client of its own.
func newStore(t testing.TB, opts ...redisfence.Option) *redisfence.Store {
	t.Helper()
	return mustNew(t, client(t), prefix(t), opts...)
}

func mustHash(t testing.TB, c redisfence.Client) *redisfence.Hash {
	t.Helper()
	h, err := redisfence.NewHash(c, "fence")
	if err != nil {
		t.Fatalf("NewHash: got %v, want nil", err)
	}
	return h
}

func mustPut(t testing.TB, s *redisfence.Store, key string, token fence.Token, value string) {
	t.Helper()
	if err := s.Put(t.Context(), key, token, []byte(value)); err != nil {
		t.Fatalf("Put(%q, %d): got %v, want nil", key, token, err)
	}
}

// field returns a field of a Redis hash ("" when missing).
func field(t testing.TB, c *redis.Client, key, f string) string {
	t.Helper()
	v, err := c.HGet(t.Context(), key, f).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}
