package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/examples/internal/redislock"
	"github.com/fencelock/fencelock/examples/internal/redisproc"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// holderConfig is what a holder process is told, as JSON in [envHolder].
type holderConfig struct {
	Backend string // "redis" or "etcd"
	Addr    string // Redis host:port, or etcd endpoint
	Key     string // the lock's name
}

// holder takes the lock, reports LOCKED with its token (etcd) or value
// (Redis), keeps it alive, and on SIGTERM releases it the way a program's
// shutdown does and exits. SIGKILLed, it does nothing.
func holder(js string, stdout io.Writer) error {
	var cfg holderConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if cfg.Backend == "redis" {
		return redisHolder(ctx, cfg, stdout)
	}
	return etcdHolder(ctx, cfg, stdout)
}

// redisHolder holds the Redis lock, renewing it, until ctx ends, then
// releases it with the compare-and-delete script.
func redisHolder(ctx context.Context, cfg holderConfig, stdout io.Writer) error {
	c := redisproc.NewClient(cfg.Addr)
	defer c.Close()
	lock, err := redislock.Acquire(ctx, c, cfg.Key, ttl)
	if err != nil {
		return err
	}
	if err := childproc.Report(stdout, "LOCKED", lock.Value); err != nil {
		return err
	}
	lock.KeepAlive(ctx) // until SIGTERM
	_, err = lock.Release(context.Background())
	return err
}

// etcdHolder holds the etcdlock lock until ctx ends, then closes its
// client, which revokes the session's lease.
func etcdHolder(ctx context.Context, cfg holderConfig, stdout io.Writer) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(ttl))
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	lock, err := locks.Lock(wctx, cfg.Key)
	if err != nil {
		return err
	}
	if err := childproc.Report(stdout, "LOCKED", fmt.Sprintf("%d", lock.Token())); err != nil {
		return err
	}
	<-ctx.Done() // SIGTERM
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return locks.Close(cctx)
}

// startHolder starts a holder process.
func startHolder(cfg holderConfig) (*childproc.Proc, error) {
	cmd, err := childproc.Reexec(envHolder, cfg)
	if err != nil {
		return nil, err
	}
	return childproc.Start(cmd, nil)
}
