package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
)

// redisPrefix is the prefix of the Redis Store's keys in a run's server
// (the run's own).
const redisPrefix = "fencecheck:"

// redisResource is a hash of the run's redis-server: fenced, written with
// fence/redis's Store.Put (one script comparing the hash's floor); in the
// control, with a plain HSET of the token and value the Store would
// write.
type redisResource struct {
	c     *redis.Client
	store *redisfence.Store
}

func openRedisResource(addr string) (redisResource, error) {
	c := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	st, err := redisfence.New(c, redisPrefix)
	if err != nil {
		_ = c.Close()
		return redisResource{}, err
	}
	return redisResource{c: c, store: st}, nil
}

func (r redisResource) close() {
	if r.c != nil {
		_ = r.c.Close()
	}
}

func (r redisResource) write(ctx context.Context, fenced bool, key string, tok fence.Token, val string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if fenced {
		return r.store.Put(ctx, key, tok, []byte(val))
	}
	return r.c.HSet(ctx, r.store.Key(key), "token", redisToken(tok), "value", val).Err()
}

func (r redisResource) read(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	rec, err := r.store.Get(ctx, key)
	if errors.Is(err, fence.ErrNotFound) {
		return "", nil
	}
	return string(rec.Value), err
}

// redisToken is a token as fence/redis stores it.
func redisToken(tok fence.Token) string {
	return fmt.Sprintf("%0*d", redisfence.TokenDigits, int64(tok))
}
