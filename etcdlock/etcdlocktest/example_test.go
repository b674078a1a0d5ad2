package etcdlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
)

// A worker holds a lock and writes through a guard. The test cuts the worker
// off; another client takes the lock and writes. The worker is told to stop,
// and the write it had in flight, arriving late, is refused by the store.
//
// In a test, use etcdlocktest.New(t) and srv.Client(t) instead of Start and
// NewClient: they close everything when the test ends.
func Example() {
	ctx := context.Background()
	srv, err := etcdlocktest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	store := fence.NewMemoryStore()

	// The worker takes the lock and writes with its token.
	worker := lockAs(srv, "report")
	defer worker.close()
	guard, err := fence.NewGuard(worker.lock)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker writes:", guard.Put(ctx, store, "report", []byte("worker v1")))

	// It starts another write: the guard's check passes, then the write is
	// held up (a GC pause, a slow network) until after the lock is gone.
	checked, resume, late := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		late <- guard.Do(ctx, func(ctx context.Context, token fence.Token) error {
			close(checked)
			<-resume
			return store.Put(ctx, "report", token, []byte("worker v2"))
		})
	}()
	<-checked

	srv.Partition(worker.cli)
	<-worker.lock.Done()
	fmt.Println("worker told to stop:", errors.Is(worker.lock.Err(), etcdlock.ErrValidityExpired))

	// Once etcd expires the worker's lease, another client gets the lock.
	other := lockAs(srv, "report")
	defer other.close()
	otherGuard, err := fence.NewGuard(other.lock)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("other writes:", otherGuard.Put(ctx, store, "report", []byte("other v1")))

	close(resume)
	fmt.Println("worker's late write refused:", errors.Is(<-late, fence.ErrStale))
	rec, err := store.Get(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("store holds: %q\n", rec.Value)
	// Output:
	// worker writes: <nil>
	// worker told to stop: true
	// other writes: <nil>
	// worker's late write refused: true
	// store holds: "other v1"
}

// holder is a lock taken through clients of its own.
type holder struct {
	cli   *clientv3.Client
	locks *etcdlock.Client
	lock  *etcdlock.Lock
}

func (h holder) close() {
	h.locks.Close(context.Background())
	h.cli.Close()
}

// lockAs takes lock name with a 1 s lease through a new client of srv.
func lockAs(srv *etcdlocktest.Server, name string) holder {
	cli, err := srv.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock, err := locks.Lock(ctx, name)
	if err != nil {
		log.Fatal(err)
	}
	return holder{cli: cli, locks: locks, lock: lock}
}
