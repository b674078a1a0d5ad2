package etcdfence_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// ExampleStore_UpdateHeld moves 30 from one account to another under the
// locks of both, in one etcd transaction: the two balances are written
// together or not at all, each fenced by its own lock's token. Two
// Updates would leave the debit alone if the holder stopped between them
// and a newer holder went on.
func ExampleStore_UpdateHeld() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   embedetcd.Shared().Endpoints(), // e.g. []string{"127.0.0.1:2379"}
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	defer cli.Delete(ctx, "/example/held/", clientv3.WithPrefix())
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example/held/locks/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.WithoutCancel(ctx))
	store, err := etcdfence.New(cli, "/example/held/fences/")
	if err != nil {
		log.Fatal(err)
	}

	held, err := locks.LockAll(ctx, []string{"acct/A", "acct/B"})
	if err != nil {
		log.Fatal(err)
	}
	defer held.Unlock(context.WithoutCancel(ctx))
	err = store.UpdateHeld(ctx, held, func(old map[string]fence.Record) (map[string][]byte, error) {
		a, b := 100, 0 // the zero Record: no value yet; start A at 100
		if old["acct/A"].Value != nil {
			if a, err = strconv.Atoi(string(old["acct/A"].Value)); err != nil {
				return nil, err // nothing is written; UpdateHeld returns it
			}
		}
		if old["acct/B"].Value != nil {
			if b, err = strconv.Atoi(string(old["acct/B"].Value)); err != nil {
				return nil, err
			}
		}
		return map[string][]byte{
			"acct/A": []byte(strconv.Itoa(a - 30)),
			"acct/B": []byte(strconv.Itoa(b + 30)),
		}, nil
	})
	if err != nil {
		log.Fatal(err) // a *fence.StaleError names the key a newer holder took; nothing was written
	}
	for _, k := range []string{"acct/A", "acct/B"} {
		rec, err := store.Get(ctx, k)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, written with its own lock's token: %t\n", k, rec.Value, rec.Token == held.Lock(k).Token())
	}
	// Output:
	// acct/A: 70, written with its own lock's token: true
	// acct/B: 30, written with its own lock's token: true
}
