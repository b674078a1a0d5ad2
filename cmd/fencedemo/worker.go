package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// workerConfig is what worker A is told, as JSON in [envWorker].
type workerConfig struct {
	Etcd     string // endpoint
	Resource string // base URL
	Name     string // of the lock
}

// worker is client A, run as its own process so that it can really be
// frozen with SIGSTOP. In childproc's worker protocol it reports LOCKED
// (token, TTL), READY once past its guard check, then waits for the
// go-ahead on stdin before writing, and reports the RESULT.
func worker(js string, stdin io.Reader, stdout io.Writer) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())

	ctx := context.Background()
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second) // bounds the wait, not the write
	defer cancel()
	lock, err := locks.Lock(waitCtx, cfg.Name)
	if err != nil {
		return err
	}
	if err := childproc.Report(stdout, "LOCKED", fmt.Sprintf("%d %s", lock.Token(), lock.TTL())); err != nil {
		return err
	}
	guard, err := fence.NewGuard(lock)
	if err != nil {
		return err
	}
	err = guard.Do(ctx, func(ctx context.Context, token fence.Token) error {
		if err := childproc.Report(stdout, "READY", ""); err != nil {
			return err
		}
		if err := childproc.AwaitGo(stdin); err != nil { // the pause lands here, between the check and the write
			return err
		}
		return httpStore{cfg.Resource}.Put(ctx, "balance", token, []byte("A: balance=90"))
	})
	return childproc.Report(stdout, "RESULT", errOrOK(err))
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
