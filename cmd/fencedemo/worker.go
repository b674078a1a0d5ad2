package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// worker is client A, run as its own process so that it can really be
// frozen with SIGSTOP. It reports on stdout, one line per step, and waits for
// "go" on stdin between passing its guard check and writing.
func worker(etcd, resourceURL, name string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock, err := locks.Lock(ctx, name)
	if err != nil {
		return err
	}
	fmt.Printf("locked %d %s\n", lock.Token(), lock.TTL())
	guard, err := fence.NewGuard(lock)
	if err != nil {
		return err
	}
	stdin := bufio.NewScanner(os.Stdin)
	err = guard.Do(ctx, func(ctx context.Context, token fence.Token) error {
		fmt.Println("checked")
		stdin.Scan() // the pause lands here, between the check and the write
		return httpStore{resourceURL}.Put(ctx, "balance", token, []byte("A: balance=90"))
	})
	fmt.Printf("result %v\n", errOrOK(err))
	return nil
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
