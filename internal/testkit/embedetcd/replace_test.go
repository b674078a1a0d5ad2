package embedetcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Replacing every member in turn, and then the leader, through the
// membership API keeps the cluster serving writes throughout: each
// replacement is a new member (a new ID) that ends up voting, with the
// latest value on its fresh data dir, and writes go on landing while
// members are removed, added and promoted.
func TestClusterReplace(t *testing.T) {
	testenv.Long(t, "a multi-member cluster whose members are replaced")
	c := embedetcd.New(t, 3)
	cli := otheretcd.Client(t, c.Endpoints()...)
	put(t, cli, "k", "v0")
	writes := writeUnderLoad(t, c)

	ids := memberIDs(t, c)
	rounds := []int{0, 1, 2, -1} // -1: whichever member leads
	for r, i := range rounds {
		if i < 0 {
			i = awaitLeader(t, c)
		}
		before, start := writes.Load(), time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		err := c.Replace(ctx, i)
		cancel()
		if err != nil {
			t.Fatalf("round %d: replace member %d: %v", r, i, err)
		}
		during := writes.Load() - before
		t.Logf("round %d: replaced member %d in %v; %d writes landed meanwhile", r, i, time.Since(start).Round(time.Millisecond), during)

		now := memberIDs(t, c)
		if now[i] == ids[i] {
			t.Errorf("round %d: member %d still has ID %x: not a new member", r, i, ids[i])
		}
		for j := range c.Members {
			if j != i && now[j] != ids[j] {
				t.Errorf("round %d: member %d's ID changed from %x to %x; only %d was replaced", r, j, ids[j], now[j], i)
			}
		}
		ids = now
		v := fmt.Sprint("v", r+1)
		put(t, cli, "k", v)
		// The replacement serves the latest value (a linearizable read: it
		// votes and has caught up).
		resp, err := otheretcd.Client(t, c.Members[i].ClientURL).Get(t.Context(), "k")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != v {
			t.Fatalf("round %d: get k from replaced member %d: got %v, %v; want %s", r, i, resp, err, v)
		}
	}
	if n := writes.Load(); n == 0 {
		t.Fatal("no write landed during the replacements")
	}
}

// memberIDs returns the ID of each member, by index, and fails the test if
// the cluster has any other member or a learner.
func memberIDs(t *testing.T, c *embedetcd.Cluster) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := otheretcd.Client(t, c.Endpoints()...).MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	byURL := map[string]*etcdserverpb.Member{}
	for _, m := range resp.Members {
		if m.IsLearner {
			t.Errorf("member %x (%s) is a learner", m.ID, m.Name)
		}
		for _, u := range m.PeerURLs {
			byURL[u] = m
		}
	}
	if len(resp.Members) != len(c.Members) {
		t.Fatalf("member list: %d members, want %d: %v", len(resp.Members), len(c.Members), resp.Members)
	}
	var ids []uint64
	for i, m := range c.Members {
		em, ok := byURL[m.PeerURL]
		if !ok {
			t.Fatalf("member %d (%s) is not in the member list %v", i, m.PeerURL, resp.Members)
		}
		ids = append(ids, em.ID)
	}
	return ids
}

// writeUnderLoad keeps one writer putting key w until the test ends, and
// counts the puts that land.
func writeUnderLoad(t *testing.T, c *embedetcd.Cluster) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	cli := otheretcd.Client(t, c.Endpoints()...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			if _, err := cli.Put(pctx, "w", fmt.Sprint(i)); err == nil {
				n.Add(1)
			}
			pcancel()
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &n
}

// A replacement while another member is down waits for it, and removes
// nothing meanwhile: removing a live member then would leave two voters,
// one of them down, and no quorum. etcd's strict reconfiguration check,
// which refused such a removal, is off on these members; Replace checks
// the members that stay itself. Once the stopped member is back, the
// replacement goes ahead.
func TestReplaceWaitsForStoppedMember(t *testing.T) {
	testenv.Long(t, "a multi-member cluster, a member stopped during a replacement")
	c := embedetcd.New(t, 3)
	ids := memberIDs(t, c)
	c.Stop(1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	err := c.Replace(ctx, 0)
	cancel()
	if err == nil {
		t.Fatal("Replace of member 0 with member 1 down: got nil, want an error")
	}
	t.Logf("Replace with member 1 down: %v", err)
	if err := c.Restart(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if now := memberIDs(t, c); now[0] != ids[0] {
		t.Fatalf("member 0's ID went from %x to %x: it was removed while member 1 was down", ids[0], now[0])
	}
	ctx, cancel = context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := c.Replace(ctx, 0); err != nil {
		t.Fatalf("Replace once member 1 is back: %v", err)
	}
	if now := memberIDs(t, c); now[0] == ids[0] {
		t.Fatalf("member 0 still has ID %x: not replaced", ids[0])
	}
}
