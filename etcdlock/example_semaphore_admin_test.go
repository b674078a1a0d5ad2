package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// An operator reads a semaphore without knowing its permits, and frees a
// stuck worker's permit by its token, as fencelock status and break
// --semaphore do.
func ExampleClient_BreakSemaphore() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-break-semaphore/"), etcdlock.WithOwner("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	pool, _ := locks.Semaphore("workers", 3)
	stuck, err := pool.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	sq, err := locks.InspectSemaphore(ctx, "workers")
	if err != nil {
		log.Fatal(err)
	}
	h := sq.Holders[0]
	fmt.Printf("%d permits; the worker's slot held by %s: %v, its token the worker's: %v\n", sq.Permits, h.Owner, h.Slot == stuck.Slot(), h.Token == stuck.Token())

	e, err := locks.BreakSemaphore(ctx, "workers", h.Token)
	fmt.Println("broke the worker's slot:", e.Slot == stuck.Slot(), err)
	<-stuck.Done()
	fmt.Println("the worker learns:", stuck.Err())
	// Output:
	// 3 permits; the worker's slot held by worker-1: true, its token the worker's: true
	// broke the worker's slot: true <nil>
	// the worker learns: etcdlock: lock lost: etcdlock: lock key deleted by someone else
}
