package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// Example writes a record with a fencing token, reads it back, and shows a
// paused holder's late write, with an older token, refused by etcd.
func Example() {
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
	store, err := etcdfence.New(cli, "/example/fences/")
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Delete(ctx, "/example/fences/", clientv3.WithPrefix())

	// 34 is the token of the lock this process holds, e.g. lock.Token().
	if err := store.Put(ctx, "scheduler/state", 34, []byte(`{"leader": "b"}`)); err != nil {
		log.Fatal(err)
	}
	// The holder of token 33, paused until its lock was gone, writes late.
	err = store.Put(ctx, "scheduler/state", 33, []byte(`{"leader": "a"}`))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("token %d refused: etcd holds %d\n", stale.Token, stale.Current)
	}
	rec, err := store.Get(ctx, "scheduler/state")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, token %d\n", rec.Value, rec.Token)
	// Output:
	// token 33 refused: etcd holds 34
	// {"leader": "b"}, token 34
}
