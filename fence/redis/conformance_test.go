package redisfence_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

func TestConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return newStore(t) })
}

// TestContention: many writers, each with a client of its own, on one key
// with values of 1 MiB.
func TestContention(t *testing.T) {
	p := prefix(t)
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return mustNew(t, client(t), p) },
		fencetest.WithValueSize(1<<20), fencetest.WithWriters(8))
}

// TestConformanceCluster runs the suite through a *redis.ClusterClient, on
// a cluster of one node: every script names its one key, which the client
// routes by slot.
func TestConformanceCluster(t *testing.T) {
	addr := redistest.NewCluster(t)
	fencetest.Run(t, func(t *testing.T) fence.Store {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { c.Close() })
		return mustNew(t, c, prefix(t))
	})
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	h := mustHash(t, c)
	k := prefix(t) + "{acct}"
	if err := h.Set(t.Context(), k, 5, map[string]string{"balance": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Set(t.Context(), k, 4, map[string]string{"balance": "2"}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Hash.Set(4) after 5 through the cluster client: got %v", err)
	}
}
