package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// TestDispatcherGroup: dispatchers run as an etcdlock Group's partition
// owners, each over its partition's Scope; two workers share 4 partitions,
// every effect is delivered, each by the owner of its resource's
// partition, and in order per resource.
func TestDispatcherGroup(t *testing.T) {
	srv := embedetcd.NewServer(t)
	m := outbox.NewMemoryLog()
	type sent struct {
		worker string
		part   int
		key    string
	}
	var mu sync.Mutex
	var got []sent
	owners := map[int]string{} // partition: its worker, while it runs there
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, w := range []string{"w1", "w2"} {
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		locks, err := etcdlock.New(cli, etcdlock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { locks.Close(context.Background()) })
		g, err := locks.Group("mail-dispatchers", 4)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error {
				s := outbox.SenderFunc(func(_ context.Context, e outbox.Effect) error {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, sent{w, p.Index(), e.Key()})
					return nil
				})
				d := newDispatcher(t, m, s, outbox.WithName("mail"))
				mu.Lock()
				owners[p.Index()] = w
				mu.Unlock()
				defer func() { mu.Lock(); delete(owners, p.Index()); mu.Unlock() }()
				err := d.Run(ctx, p, outbox.Scope{Index: p.Index(), Partitions: g.Partitions()})
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			})
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	poll.Until(t, "both workers owning two partitions each", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := map[string]int{}
		for _, w := range owners {
			n[w]++
		}
		return n["w1"] == 2 && n["w2"] == 2
	})
	want := map[string]outbox.Effect{}
	for i := range 40 {
		res := fmt.Sprintf("order-%d", i%10)
		e := effect(res, fence.Token(100+i), int64(i))
		mustRecord(t, m, e)
		want[e.Key()] = e
	}
	waitPending(t, m, 0)
	poll.Until(t, "every effect sent", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= len(want) })
	mu.Lock()
	defer mu.Unlock()
	workers := map[string]bool{}
	last := map[string]fence.Token{}
	for _, s := range got {
		e, ok := want[s.key]
		if !ok {
			t.Fatalf("sent %s, which was never recorded", s.key)
		}
		if p := outbox.PartitionOf(e.Resource, 4); p != s.part {
			t.Errorf("%s (%s, partition %d) sent by the owner of partition %d", s.key, e.Resource, p, s.part)
		}
		if e.Token < last[e.Resource] {
			t.Errorf("%s sent after a later effect of %s", s.key, e.Resource)
		}
		last[e.Resource] = e.Token
		workers[s.worker] = true
	}
	if len(workers) != 2 {
		t.Errorf("effects sent by %d workers, want both to share the partitions", len(workers))
	}
}
