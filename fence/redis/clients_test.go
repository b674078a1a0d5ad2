package redisfence_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

func noPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: panic: %v", name, r)
		}
	}()
	f()
}

// "nil/typed-nil clients and zero values never panic": New accepts a
// zero *redis.Client (not nil), and its first call panics; a nil *Store
// or *Hash panics in Key, Prefix and TokenField.
func TestReviewZeroValuesPanic(t *testing.T) {
	noPanic(t, "Put through &redis.Client{}", func() {
		s, err := redisfence.New(&redis.Client{}, "p:")
		if err != nil {
			return // refused: fine
		}
		_ = s.Put(t.Context(), "k", 1, nil)
	})
	noPanic(t, "Put through &redis.ClusterClient{}", func() {
		s, err := redisfence.New(&redis.ClusterClient{}, "p:")
		if err != nil {
			return
		}
		_ = s.Put(t.Context(), "k", 1, nil)
	})
	var s *redisfence.Store
	var h *redisfence.Hash
	noPanic(t, "(*Store)(nil).Key", func() { _ = s.Key("k") })
	noPanic(t, "(*Store)(nil).Prefix", func() { _ = s.Prefix() })
	noPanic(t, "(*Hash)(nil).TokenField", func() { _ = h.TokenField() })
}

// A redis.Pipeliner (whose Process only queues) and a *redis.Ring (which
// moves keys between shards, away from their floors) are refused.
func TestRingAndPipelinerRefused(t *testing.T) {
	c := client(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": redistest.New(t).Addr()}, Protocol: 2, DisableIdentity: true})
	defer ring.Close()
	for name, cl := range map[string]redisfence.Client{"Pipeliner": c.Pipeline(), "TxPipeliner": c.TxPipeline(), "Ring": ring} {
		if _, err := redisfence.New(cl, "p:"); !errors.Is(err, redisfence.ErrInvalidArgument) {
			t.Errorf("New with a %s: got %v, want ErrInvalidArgument", name, err)
		}
		if _, err := redisfence.NewHash(cl, "fence"); !errors.Is(err, redisfence.ErrInvalidArgument) {
			t.Errorf("NewHash with a %s: got %v, want ErrInvalidArgument", name, err)
		}
	}
}
