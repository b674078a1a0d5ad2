package embedetcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/embedetcd"
)

// Stopping the members of a multi-member cluster leaves etcd's idle peer HTTP
// connections to time out on their own; only those are ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}

func TestSingleMemberGrantsOneSecondLeases(t *testing.T) {
	c := embedetcd.New(t, 1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Grant(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TTL != 1 {
		t.Fatalf("granted TTL: got %d, want 1", resp.TTL)
	}
}

func TestClusterSurvivesMemberRestart(t *testing.T) {
	c := embedetcd.New(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := c.Leader()
	if l < 0 {
		t.Fatal("no leader")
	}
	c.Stop(l)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// A request in flight when the leader crashed may time out; the two
	// survivors elect a new leader and a retry gets through.
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(pctx, "k", "v")
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("put with the leader down: %v", err)
		}
	}
	if err := c.Restart(ctx, l); err != nil {
		t.Fatal(err)
	}
}
