package redisholder_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence/redisholder"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

// TestMain starts the redis-server every test in this package shares.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Main(m)) }

// client returns a client of the shared server, closed when the test ends.
func client(t testing.TB) *redis.Client {
	t.Helper()
	return redistest.New(t).Client(t)
}

// key returns a lock key no other test or run uses.
func key(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fencelock-test:" + strings.ReplaceAll(t.Name(), "/", "-") + ":" + hex.EncodeToString(b[:])
}

// obtain takes key for ttl, failing t otherwise; the lock is released
// when t ends.
func obtain(t *testing.T, c redisholder.Client, key string, ttl time.Duration, opts ...redisholder.Option) *redisholder.Lock {
	t.Helper()
	l, err := redisholder.Obtain(t.Context(), c, key, ttl, nil, opts...)
	if err != nil {
		t.Fatalf("Obtain(%q): got %v, want nil", key, err)
	}
	t.Cleanup(func() { _ = l.Release(context.WithoutCancel(t.Context())) })
	return l
}

// counter returns the value of the token counter of key.
func counter(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	n, err := c.Get(t.Context(), redisholder.TokenKey(key)).Int64()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
