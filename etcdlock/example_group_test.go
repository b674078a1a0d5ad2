package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
)

// consume is a consumer group's work for one partition while this worker
// owns it: it takes the partition's next batch from where the last owner
// stopped and commits the new offset, both in one fenced read-modify-write
// of the partition's offset key. The read claims the key with the
// partition's token, so a deposed owner that wakes up late can neither
// commit its offset nor have it read by the next owner. ctx says when to
// stop; the commit is sent with the partition's WriteContext, which a
// move does not cancel in flight.
func consume(ctx context.Context, p *etcdlock.Partition, offsets fence.Updater) error {
	guard, err := fence.NewGuard(p)
	if err != nil {
		return err
	}
	key := "orders/" + strconv.Itoa(p.Index())
	for {
		// Not ctx: a move would cancel the commit in flight, its outcome
		// unknown, although the partition is ours until it is released.
		err := guard.Update(p.WriteContext(), offsets, key, func(old fence.Record) ([]byte, error) {
			offset, _ := strconv.Atoi(string(old.Value)) // 0 when never committed
			// ... process the messages of partition p.Index() from offset on ...
			return []byte(strconv.Itoa(offset + 10)), nil
		})
		if err != nil {
			return err // the error handler logs it; the partition is taken again after a pause
		}
		select {
		case <-ctx.Done(): // the partition moved, was lost, or the worker is leaving
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A consumer group: two workers share 8 partitions, four each; when one
// leaves, the other takes its four over, each with a greater token.
func ExampleGroup_Join() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	offsets, err := etcdfence.New(cli, "/example-group-offsets/") // any fenced store
	if err != nil {
		log.Fatal(err)
	}

	worker := func(owner string) (leave func()) {
		locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-group/"), etcdlock.WithOwner(owner))
		if err != nil {
			log.Fatal(err)
		}
		orders, err := locks.Group("orders", 8)
		if err != nil {
			log.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- orders.Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error {
				return consume(ctx, p, offsets)
			}, etcdlock.WithPartitionErrorHandler(func(partition int, err error) {
				log.Printf("partition %d: %v", partition, err)
			}))
		}()
		return func() {
			cancel()
			<-done // Join returns once every partition's work has returned
			locks.Close(context.Background())
		}
	}
	leaveA := worker("worker-a")
	defer leaveA()
	leaveB := worker("worker-b")

	admin, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-group/"))
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close(context.Background())
	orders, _ := admin.Group("orders", 8)
	fmt.Println(waitSettled(orders, 2))
	before, _ := orders.Inspect(context.Background())

	leaveB()
	fmt.Println(waitSettled(orders, 1))
	after, _ := orders.Inspect(context.Background())
	moved, higher := 0, true
	for k, p := range after.Owners {
		if was := before.Owners[k].Owner; p.Owner.Lease != was.Lease {
			moved++
			higher = higher && p.Owner.Token > was.Token
		}
	}
	fmt.Println("moved:", moved, "each with a greater token:", higher)
	// Output:
	// worker-a owns 4, worker-b owns 4
	// worker-a owns 8
	// moved: 4 each with a greater token: true
}

// waitSettled polls the group until its members own their share, and
// says who owns how many.
func waitSettled(g *etcdlock.Group, members int) string {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := g.Inspect(context.Background())
		if err != nil || len(st.Members) != members || st.Moves != 0 {
			continue
		}
		owned := st.Owned()
		var out []string
		for _, m := range st.Members {
			out = append(out, fmt.Sprintf("%s owns %d", m.Owner, owned[m.Key]))
		}
		slices.Sort(out)
		return strings.Join(out, ", ")
	}
	return "not settled"
}
