package embedetcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Crashing members under a load of serializable reads, the leader and a
// follower in turn, leaves this process running and the cluster serving:
// with members inside this process, a read in flight when its member
// stopped could panic the process (etcd-io/etcd#17223).
func TestClusterSurvivesMemberCrashes(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	c := embedetcd.New(t, 3)
	cli := otheretcd.Client(t, c.Endpoints()...)
	put(t, cli, "k", "v0")
	reads := readUnderLoad(t, c)
	for round := range 4 {
		i := crashOne(t, c, round%2 == 0)
		put(t, cli, "k", fmt.Sprint("v", round+1)) // two members are a quorum
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := c.Restart(ctx, i)
		cancel()
		if err != nil {
			t.Fatalf("restart of member %d: %v", i, err)
		}
		if !c.Running(i) {
			t.Fatalf("member %d not running after Restart", i)
		}
	}
	if n := reads.Load(); n == 0 {
		t.Fatal("no read succeeded during the crashes")
	}
	// Every member, the restarted ones too, serves the latest value.
	for _, ep := range c.Endpoints() {
		resp, err := otheretcd.Client(t, ep).Get(t.Context(), "k")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v4" {
			t.Fatalf("get k from %s: got %v, %v; want v4", ep, resp, err)
		}
	}
}

// crashOne SIGKILLs the leader (or a follower) and returns its index.
func crashOne(t *testing.T, c *embedetcd.Cluster, leader bool) int {
	t.Helper()
	l := awaitLeader(t, c)
	i := l
	if !leader {
		i = (l + 1) % len(c.Members)
	}
	c.Stop(i)
	if c.Running(i) {
		t.Fatalf("member %d running after Stop", i)
	}
	return i
}

func awaitLeader(t *testing.T, c *embedetcd.Cluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if l := c.Leader(ctx); l >= 0 {
			return l
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no leader within 10s")
	return -1
}

// readUnderLoad keeps serializable reads in flight against every member
// until the test ends, and counts those that succeed.
func readUnderLoad(t *testing.T, c *embedetcd.Cluster) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ep := range c.Endpoints() {
		cli := otheretcd.Client(t, ep)
		wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				if _, err := cli.Get(rctx, "k", clientv3.WithSerializable()); err == nil {
					n.Add(1)
				}
				rcancel()
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &n
}

// put writes key, retrying while a new leader is elected.
func put(t *testing.T, cli *clientv3.Client, key, val string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(pctx, key, val)
		pcancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
}
