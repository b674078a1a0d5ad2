package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
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

// ExampleStore_Update reads before it writes: the holder of token 34
// claims the balance as it reads it, so that the late write of the holder
// of token 33 is refused rather than lost under 34's, and then adds to it
// with a read-modify-write in one call.
func ExampleStore_Update() {
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
	store, err := etcdfence.New(cli, "/example/update/")
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Delete(ctx, "/example/update/", clientv3.WithPrefix())

	// The holder of token 33 wrote a balance, then was paused until its lock was gone.
	if err := store.Put(ctx, "acct/A", 33, []byte("100")); err != nil {
		log.Fatal(err)
	}
	// 34 is the token of the lock this process holds now, e.g. lock.Token().
	rec, err := store.GetForUpdate(ctx, "acct/A", 34)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %s with token %d\n", rec.Value, rec.Token)
	// 33's last write, held up on the way, arrives. Had 34 read with Get, it
	// would land, and 34's write would erase it without an error.
	err = store.Put(ctx, "acct/A", 33, []byte("150"))
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStale))

	err = store.Update(ctx, "acct/A", 34, func(old fence.Record) ([]byte, error) {
		if old.Value == nil { // the zero Record: the key holds no value
			return []byte("100"), nil
		}
		balance, err := strconv.Atoi(string(old.Value))
		if err != nil {
			return nil, err // nothing is written; Update returns it
		}
		return []byte(strconv.Itoa(balance + 100)), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err = store.Get(ctx, "acct/A")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("balance %s, token %d\n", rec.Value, rec.Token)
	// Output:
	// read 100 with token 34
	// late write refused: true
	// balance 200, token 34
}
