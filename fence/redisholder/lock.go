package redisholder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Client is what a [Lock] needs of a Redis client: it runs scripts.
// *redis.Client, *redis.ClusterClient and *redis.Ring are Clients, as
// they are redislock.RedisClients.
type Client interface {
	redis.Scripter
}

// Lock is a bsm/redislock lock with a fencing token: a [fence.Holder] and
// a [fence.Expirer], for a [fence.Guard].
//
// Its Done is closed when its validity deadline passes (a timer), when a
// [Lock.Refresh] fails, or when it is released. Once closed it stays
// closed. It is a [fence.TokenIssuer] too: it reads its counter. A Lock
// is safe for concurrent use.
type Lock struct {
	// Set once before use.
	client   Client
	lock     *redislock.Lock
	token    fence.Token
	issuer   string
	tokenKey string // the counter's key
	done     chan struct{}

	// refreshing serialises Refresh: the key's TTL is the last refresh
	// Redis ran, and two at once on two connections may run in either
	// order, whatever order their replies come in.
	refreshing sync.Mutex

	mu    sync.Mutex // guards the fields below
	until time.Time
	timer *time.Timer // nil once ended, or when the key has no TTL
	ended bool
}

var (
	_ fence.Holder      = (*Lock)(nil)
	_ fence.Expirer     = (*Lock)(nil)
	_ fence.IssuerNamer = (*Lock)(nil)
	_ fence.TokenIssuer = (*Lock)(nil)
)

// Obtain takes the lock key for ttl with redislock (opt as
// redislock.Obtain takes it: nil for one try) and issues its token. The
// validity deadline is measured from before the first request was sent,
// or from before the token's request with the TTL that Redis reports
// then, whichever is later: both end no later than the key does.
//
// ctx bounds both requests. On an error nothing is held: a lock obtained
// whose token could not be issued is released. redislock's errors
// (redislock.ErrNotObtained) are wrapped.
func Obtain(ctx context.Context, client Client, key string, ttl time.Duration, opt *redislock.Options, opts ...Option) (*Lock, error) {
	if err := checkObtain(ctx, client, key, ttl); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	before := time.Now()
	rl, err := redislock.Obtain(ctx, client, key, ttl, opt)
	if err != nil {
		return nil, fmt.Errorf("redisholder: obtaining %q: %w", key, err)
	}
	l, err := issue(ctx, client, rl, o, before.Add(ttl.Truncate(time.Millisecond))) // as redislock sends it
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_ = rl.Release(rctx) // best effort: its TTL frees it otherwise
		return nil, err
	}
	return l, nil
}

// New issues a token for a lock already obtained with redislock by this
// client: it fails with [ErrNotHeld] if the lock's key no longer holds
// the lock's value. The validity deadline is measured from before the
// token's request, with the TTL Redis reports then. ctx bounds the
// request; on an error the lock is left as it was.
func New(ctx context.Context, client Client, lock *redislock.Lock, opts ...Option) (*Lock, error) {
	if nilcheck.IsNil(lock) {
		return nil, fmt.Errorf("%w: nil lock", ErrInvalidArgument)
	}
	if err := checkObtain(ctx, client, lock.Key(), time.Second); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return issue(ctx, client, lock, o, time.Time{})
}

// releaseTimeout bounds the release of a lock whose token failed.
const releaseTimeout = 5 * time.Second

// checkObtain checks the arguments of Obtain and New.
func checkObtain(ctx context.Context, client Client, key string, ttl time.Duration) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case nilcheck.IsNil(client):
		return fmt.Errorf("%w: nil client", ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: TTL %v (must be at least 1ms: redislock sends whole milliseconds)", ErrInvalidArgument, ttl)
	}
	return ctx.Err()
}

// issue runs the token script for rl and returns its Lock, whose deadline
// is the later of floor (zero: none) and the script's PTTL measured from
// before its request.
func issue(ctx context.Context, client Client, rl *redislock.Lock, o options, floor time.Time) (*Lock, error) {
	tokenKey := o.tokenKey
	if tokenKey == "" {
		tokenKey = TokenKey(rl.Key())
	}
	script := issueScript
	if o.unchecked {
		script = uncheckedScript
	}
	before := time.Now()
	res, err := script.Run(ctx, client, []string{rl.Key(), tokenKey}, rl.Token()+rl.Metadata()).Int64Slice()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, fmt.Errorf("%w: %q: its TTL ran out before the token was issued", ErrNotHeld, rl.Key())
	case err != nil:
		return nil, fmt.Errorf("redisholder: issuing a token for %q: %w", rl.Key(), err)
	case len(res) != 2 || res[0] <= 0:
		return nil, fmt.Errorf("redisholder: issuing a token for %q: unexpected reply %v", rl.Key(), res)
	}
	issuer := o.issuer
	if issuer == "" {
		issuer = "redis:" + tokenKey
	}
	l := &Lock{client: client, lock: rl, token: fence.Token(res[0]), issuer: issuer, tokenKey: tokenKey, done: make(chan struct{})}
	until := floor
	if pttl := time.Duration(res[1]) * time.Millisecond; res[1] >= 0 && before.Add(pttl).After(until) {
		until = before.Add(pttl)
	}
	if res[1] == -1 { // no TTL: the key lives until released
		until = time.Time{}
	}
	l.setUntil(until)
	return l, nil
}
