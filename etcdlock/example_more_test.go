package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// Readers of a configuration share the lock; the writer that changes it
// waits for them and fences its write.
func ExampleClient_RLock() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-rlock/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	r1, err := locks.RLock(ctx, "config")
	if err != nil {
		log.Fatal(err)
	}
	r2, err := locks.RLock(ctx, "config")
	if err != nil {
		log.Fatal(err)
	}
	q, _ := locks.Inspect(ctx, "config")
	fmt.Println("readers holding:", len(q.Holders))
	_, err = locks.TryLock(ctx, "config")
	fmt.Println("a writer beside them:", err != nil)
	r1.Unlock(ctx)
	r2.Unlock(ctx)

	w, err := locks.Lock(ctx, "config")
	if err != nil {
		log.Fatal(err)
	}
	defer w.Unlock(ctx)
	guard, _ := fence.NewGuard(w)
	store := fence.NewMemoryStore()
	fmt.Println("writer's token above the readers':", w.Token() > r2.Token())
	fmt.Println("write:", guard.Put(ctx, store, "config", []byte("v2")))
	// Output:
	// readers holding: 2
	// a writer beside them: true
	// writer's token above the readers': true
	// write: <nil>
}

// A pool of two workers: a semaphore with two permits, each worker fencing
// the shard of its permit's slot.
func ExampleSemaphore() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-semaphore/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	pool, err := locks.Semaphore("workers", 2)
	if err != nil {
		log.Fatal(err)
	}
	a, err := pool.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := pool.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = pool.TryAcquire(ctx)
	fmt.Println("a third worker:", err != nil)
	fmt.Println("slots:", a.Slot()+b.Slot()) // 0 and 1

	store := fence.NewMemoryStore()
	for _, w := range []*etcdlock.Lock{a, b} {
		guard, _ := fence.NewGuard(w)
		shard := fmt.Sprintf("shard-%d", w.Slot()) // one fence per slot
		fmt.Println(shard, guard.Put(ctx, store, shard, []byte("work")) == nil)
	}
	a.Unlock(ctx)
	b.Unlock(ctx)
	// Unordered output:
	// a third worker: true
	// slots: 1
	// shard-0 true
	// shard-1 true
}

// A transfer between two accounts takes both locks, all or none, and
// fences each account's write with its own lock.
func ExampleClient_LockAll() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-lockall/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	m, err := locks.LockAll(ctx, []string{"account-42", "account-7"})
	if err != nil {
		log.Fatal(err)
	}
	store := fence.NewMemoryStore()
	for _, l := range m.Locks() {
		guard, _ := fence.NewGuard(l)
		fmt.Println(l.Name(), guard.Put(ctx, store, l.Name(), []byte("balance")))
	}
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// account-42 <nil>
	// account-7 <nil>
	// unlock: <nil>
}
