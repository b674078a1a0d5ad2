package integration_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/fence/redisholder"
)

// holdersWorkerEnv, when set in the environment of this test binary, makes
// it run as the first lock holder of TestHoldersPausedHolder instead of
// running tests. Its value is the JSON of a holdersWorkerConfig.
const holdersWorkerEnv = "FENCELOCK_IT_HOLDERS_WORKER"

// holdersWorkerConfig tells a worker process where everything is.
type holdersWorkerConfig struct {
	Kind  holderKind
	Redis string // Redis's host:port, for a redislock holder
	DSN   string
	Lock  string // the redislock key, or the advisory lock's key in decimal
	Job   string
	Mode  pgMode
}

// holderKind is the lock a holder of TestHoldersPausedHolder takes.
type holderKind string

const (
	kindRedislock holderKind = "redislock"
	kindAdvisory  holderKind = "advisory"
	// kindAdvisoryLease is an advisory lock whose session the server ends
	// once it is idle for holdersTTL (pgadvisory.WithSessionTimeout).
	kindAdvisoryLease holderKind = "advisory with a session timeout"
	// kindAdvisoryServerLease is an advisory lock whose session the server
	// ends once it is idle for holdersTTL because the connection's own
	// idle_session_timeout says so (no WithSessionTimeout): pgadvisory
	// reads it and takes it as the lease.
	kindAdvisoryServerLease holderKind = "advisory with the server's session timeout"
)

// holdersTTL is the redislock holders' TTL, and the advisory lease's
// session timeout.
const holdersTTL = time.Second

// The worker runs from init, before any TestMain in this package, so that
// it starts no servers of its own.
func init() {
	if cfg := os.Getenv(holdersWorkerEnv); cfg != "" {
		os.Exit(workerMain(cfg, holdersWorkerRun))
	}
}

// holdersWorkerRun takes the lock, connects to PostgreSQL, passes the
// guard's check, reports "READY <token>" and waits for the go-ahead (the
// parent stops it meanwhile). Then it writes the job row.
func holdersWorkerRun(ctx context.Context, cfg holdersWorkerConfig) error {
	// Connected before the pause, so that the pause covers only the write.
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	h, release, err := takeHolder(ctx, cfg)
	if err != nil {
		return err
	}
	defer release()
	g, err := fence.NewGuard(h)
	if err != nil {
		return err
	}
	return g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
		if err := readyThenWait(tok); err != nil {
			return err
		}
		return pgWrite(ctx, conn, cfg.Mode, cfg.Job, tok, "A, the paused holder")
	})
}

// takeHolder takes the lock cfg names, waiting for it, and returns it with
// the function that releases it.
func takeHolder(ctx context.Context, cfg holdersWorkerConfig) (fence.Holder, func(), error) {
	switch cfg.Kind {
	case kindRedislock:
		rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
		l, err := redisholder.Obtain(ctx, rdb, cfg.Lock, holdersTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(20 * time.Millisecond)})
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return l, func() { _ = l.Release(context.WithoutCancel(ctx)); rdb.Close() }, nil
	case kindAdvisory, kindAdvisoryLease, kindAdvisoryServerLease:
		pcfg, err := pgx.ParseConfig(cfg.DSN)
		if err != nil {
			return nil, nil, err
		}
		if cfg.Kind == kindAdvisoryServerLease {
			pcfg.RuntimeParams["idle_session_timeout"] = strconv.FormatInt(holdersTTL.Milliseconds(), 10)
		}
		var key int64
		if _, err := fmt.Sscan(cfg.Lock, &key); err != nil {
			return nil, nil, err
		}
		var opts []pgadvisory.Option
		if cfg.Kind == kindAdvisoryLease {
			opts = append(opts, pgadvisory.WithSessionTimeout(holdersTTL))
		}
		l, err := pgadvisory.Acquire(ctx, pcfg, key, opts...)
		if err != nil {
			return nil, nil, err
		}
		return l, func() { _ = l.Release(context.WithoutCancel(ctx)) }, nil
	}
	return nil, nil, fmt.Errorf("unknown holder kind %q", cfg.Kind)
}
