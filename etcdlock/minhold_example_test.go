package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
)

// A job scheduled every hour on two machines: the first run takes a
// millisecond and its process ends, yet the second machine's run, a
// moment later, finds the lock still held, because the first kept it for
// at least its minimum hold.
func ExampleWithMinHold() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()

	runJob := func(machine string) {
		locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-minhold/"), etcdlock.WithOwner(machine))
		if err != nil {
			log.Fatal(err)
		}
		defer locks.Close(ctx) // the process ends: its session's lease is revoked
		lock, err := locks.TryLock(ctx, "hourly-report", etcdlock.WithMinHold(50*time.Minute))
		var held *etcdlock.LockedError
		if errors.As(err, &held) {
			fmt.Println(machine+": skipped, held by", held.Holder.Owner)
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(machine + ": ran the job")
		if err := lock.Unlock(ctx); err != nil { // at once; the key stays for 50 minutes
			log.Fatal(err)
		}
	}
	runJob("host-1")
	runJob("host-2")

	// (The example frees the lock for its next run; a job would not.)
	admin, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-minhold/"))
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close(ctx)
	q, err := admin.Inspect(ctx, "hourly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held for at most:", q.Holder.TTL.Round(time.Minute))
	if _, err := cli.Revoke(ctx, q.Holder.Lease); err != nil {
		log.Fatal(err)
	}
	// Output:
	// host-1: ran the job
	// host-2: skipped, held by host-1
	// held for at most: 50m0s
}
