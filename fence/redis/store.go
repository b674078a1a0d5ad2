package redisfence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
)

// The fields of a Store's hash.
const (
	fieldFloor   = "floor"   // the highest token accepted or claimed
	fieldToken   = "token"   // the token of the write that stored value
	fieldValue   = "value"   // the record's value
	fieldVersion = "version" // a count of the writes, which Update compares
)

// The operations telemetry names.
const (
	opPut               = "put"
	opDelete            = "delete"
	opGetForUpdate      = "get_for_update"
	opUpdate            = "update"
	opHashSet           = "hash_set"
	opHashGetForUpdate  = "hash_get_for_update"
	opHashUpdate        = "hash_update"
	instrumentationName = "github.com/fencelock/fencelock/fence/redis"
)

// Store is a [fence.Store] whose records are Redis hashes under one
// prefix: resource key K is the hash prefix+K, with the fields floor (the
// highest token accepted or claimed for K), token and value (the record),
// and version (a count of the writes). Every write is one Lua script, which
// Redis runs atomically: it compares the floor and writes, so Redis, not
// the Store, decides every write. See the package documentation.
//
// A Store holds no state of its own beyond its configuration: it is safe
// for concurrent use, and any number of Stores, in any number of
// processes, may share a prefix. The zero Store is not usable (its methods
// fail with [ErrInvalidArgument]); create one with [New].
type Store struct {
	c      Client
	prefix string
	tel    *tel.Recorder
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// New returns a Store that keeps its hashes under prefix, through c (a
// *redis.Client, *redis.ClusterClient, *redis.Ring or any
// redis.UniversalClient). It does no I/O. It fails, before any I/O, if c
// is nil (a typed nil too) or prefix is empty (an error matching
// [ErrInvalidArgument]), or an option is invalid ([ErrInvalidOption]).
//
// The prefix is used as given: end it with a separator ("app:fences:").
// On a cluster, every key is its own slot unless the resource keys carry
// a hash tag ("{tenant7}:orders"); the Store needs nothing across keys.
func New(c Client, prefix string, opts ...Option) (*Store, error) {
	if nilcheck.IsNil(c) {
		return nil, fmt.Errorf("%w: New: nil client (%T)", ErrInvalidArgument, c)
	}
	if err := checkClient(c); err != nil {
		return nil, err
	}
	if prefix == "" {
		return nil, fmt.Errorf("%w: New: empty prefix", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("redis", instrumentationName, o.meters, o.tracers, opPut, opDelete, opGetForUpdate, opUpdate, opUpdateAll)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Store{c: c, prefix: prefix, tel: r}, nil
}

// checkClient refuses the clients through which a fence cannot hold: a
// *redis.Ring, which moves a key to another shard when its shard misses
// its heartbeats or a shard is added, where the key has no floor and a
// stale token's write lands; and a redis.Pipeliner, whose Process only
// queues a command for a later Exec.
func checkClient(c Client) error {
	switch c := c.(type) {
	case *redis.Ring:
		return fmt.Errorf("%w: a *redis.Ring moves keys between shards, away from their floors; use a *redis.Client or *redis.ClusterClient", ErrInvalidArgument)
	case redis.Pipeliner:
		return fmt.Errorf("%w: a redis.Pipeliner only queues commands; give the client itself", ErrInvalidArgument)
	case *redis.Client:
		if !built(func() bool { return c.Options() != nil }) {
			return fmt.Errorf("%w: a zero *redis.Client; create one with redis.NewClient", ErrInvalidArgument)
		}
	case *redis.ClusterClient:
		if !built(func() bool { return c.Options() != nil }) {
			return fmt.Errorf("%w: a zero *redis.ClusterClient; create one with redis.NewClusterClient", ErrInvalidArgument)
		}
	}
	return nil
}

// built reports whether a client's options can be read: a zero client
// (&redis.Client{}, not made by go-redis) panics on it, and on every call.
func built(options func() bool) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return options()
}

// Prefix returns the prefix of the store's keys ("" for a nil Store).
func (s *Store) Prefix() string {
	if s == nil {
		return ""
	}
	return s.prefix
}

// Key returns the Redis key of the hash holding resource key.
func (s *Store) Key(key string) string { return s.Prefix() + key }

// Get returns the record under key: its value and the token of the write
// that stored it. It returns an error matching [fence.ErrNotFound] if key
// has never been written or was deleted ([Store.Delete]), [ErrCorrupt] if
// its Redis key holds something this package did not write, and one
// matching [fence.ErrInvalidKey] for an empty key, before any I/O. It
// claims nothing: read with [Store.GetForUpdate] what a write of yours
// will follow. ctx bounds the request.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	cmd := redis.NewSliceCmd(ctx, "hmget", s.Key(key), fieldToken, fieldValue)
	if err := s.c.Process(ctx, cmd); err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.Contains(re.Error(), "WRONGTYPE") {
			return fence.Record{}, fmt.Errorf("%w: %q is not a hash: %w", ErrCorrupt, key, err)
		}
		return fence.Record{}, fmt.Errorf("redisfence: get %q: %w", key, err)
	}
	v := cmd.Val()
	return record(key, v, 0, 1)
}

// record reads the record from reply's elements at tok and val.
func record(key string, reply []any, tok, val int) (fence.Record, error) {
	v, ok := str(reply, val)
	if t, _ := str(reply, tok); !ok || t == "" { // none, or a tombstone
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	t, _ := str(reply, tok)
	token, ok := parseToken(t)
	if !ok {
		return fence.Record{}, fmt.Errorf("%w: %q: token %q", ErrCorrupt, key, t)
	}
	return fence.Record{Token: token, Value: []byte(v)}, nil
}

// checkCall validates the Store, a call's key and its context before any
// I/O.
func (s *Store) checkCall(ctx context.Context, key string) error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	if key == "" {
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

// checkWrite validates a write before any I/O.
func (s *Store) checkWrite(ctx context.Context, key string, token fence.Token) error {
	if token <= 0 {
		return fmt.Errorf("%w: token %d for %q", fence.ErrInvalidToken, token, key)
	}
	return s.checkCall(ctx, key)
}
