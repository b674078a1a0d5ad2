package redisfence_test

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	"github.com/fencelock/fencelock/internal/testkit/trypage"
)

// docs/redis.md's "Try it on your machine" works as the page says: its
// shell line starts redis-server (on a free port), and the page's client,
// newClient, gives a Store that writes with token 34 and refuses 33.
func TestPageTryIt(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, err.Error(), "install redis-server (bash .ci/setup.sh, or apt-get install -y redis-server)")
	}
	var rdb *redis.Client
	trypage.Start(t, trypage.Run{
		Line: trypage.Line(t, "docs/redis.md", "redis-server"),
		Port: "6379",
		Ready: func(ctx context.Context, port int) error {
			if rdb == nil {
				rdb = newClient("127.0.0.1:" + strconv.Itoa(port))
				t.Cleanup(func() { _ = rdb.Close() })
			}
			return rdb.Ping(ctx).Err()
		},
	})
	store, err := redisfence.New(rdb, "app:fences:")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), "k", 34, []byte("B")); err != nil {
		t.Fatalf("Put with token 34: got %v, want nil", err)
	}
	fencewant.Stale(t, store.Put(t.Context(), "k", 33, []byte("A")), 33, 34)
	if rec, err := store.Get(t.Context(), "k"); err != nil || rec.Token != 34 || string(rec.Value) != "B" {
		t.Fatalf("Get: got token %d %q %v, want token 34 \"B\"", rec.Token, rec.Value, err)
	}
}
