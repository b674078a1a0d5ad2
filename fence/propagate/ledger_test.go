package propagate_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// etcdClient returns a client of the shared etcd member, through addr
// when given (a proxy's).
func etcdClient(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	eps := embedetcd.Shared().Endpoints()
	if addr != "" {
		eps = []string{"http://" + addr}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func newLocker(t *testing.T, cli *clientv3.Client) *etcdlock.Client {
	t.Helper()
	prefix := "/propagate-test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
	c, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second), etcdlock.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(t.Context()) })
	return c
}

// Worker A holds the lock and is cut off from etcd (as a paused process
// is: no keepalive reaches etcd), its lease expires, and worker B takes
// the lock and calls the ledger. A's late call, with its old token, is
// refused by the fenced ledger's database: A's client sees fence.ErrStale
// and B's balance stays. The control, an unfenced ledger, takes A's late
// write over B's.
func TestLedgerRefusesPausedWorker(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			url, pool := ledgerServer(t, fenced) // first: skips without PostgreSQL
			proxy, err := netproxy.Start(strings.TrimPrefix(embedetcd.Shared().Endpoints()[0], "http://"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { proxy.Close() })
			a, b := newLocker(t, etcdClient(t, proxy.Addr())), newLocker(t, etcdClient(t, ""))
			client := &http.Client{Transport: &propagate.Transport{}}

			lockA, err := a.Lock(t.Context(), "acct-7")
			if err != nil {
				t.Fatal(err)
			}
			ctxA := withFencing(t, propagate.Fencing{Name: lockA.Name(), Token: lockA.Token()})
			proxy.Cut()        // A pauses
			defer proxy.Heal() // for A's Close
			lockB, err := b.Lock(t.Context(), "acct-7")
			if err != nil {
				t.Fatal(err)
			}
			ctxB := withFencing(t, propagate.Fencing{Name: lockB.Name(), Token: lockB.Token()})
			if err := setBalance(ctxB, client, url, 120); err != nil {
				t.Fatalf("B's call: got %v, want nil", err)
			}

			err = setBalance(ctxA, client, url, 90) // A wakes, not yet knowing, and calls
			var se *fence.StaleError
			switch got := balanceOf(t, pool); {
			case fenced && (!errors.As(err, &se) || se.Token != lockA.Token() || got != 120):
				t.Fatalf("A's late call: got %v and balance %d, want a *fence.StaleError for token %d and balance 120", err, got, lockA.Token())
			case !fenced && (err != nil || got != 90):
				t.Fatalf("control, A's late call: got %v and balance %d, want nil and 90 (the late write lands)", err, got)
			}
		})
	}
}

// A call to the fenced ledger that carries no token is refused before the
// handler runs: nothing is written.
func TestLedgerRefusesCallWithoutToken(t *testing.T) {
	url, pool := ledgerServer(t, true)
	err := setBalance(t.Context(), http.DefaultClient, url, 1)
	if !errors.Is(err, propagate.ErrMissing) || balanceOf(t, pool) != 100 {
		t.Fatalf("got %v and balance %d, want ErrMissing and 100", err, balanceOf(t, pool))
	}
}

// A call that holds another lock than the account's is refused, however
// high its token: the ledger fences on the account, and checks the name.
func TestLedgerRefusesOtherLock(t *testing.T) {
	url, pool := ledgerServer(t, true)
	client := &http.Client{Transport: &propagate.Transport{}}
	ctx := withFencing(t, propagate.Fencing{Name: "acct-8", Token: 1 << 40})
	if err := setBalance(ctx, client, url, 1); err == nil || balanceOf(t, pool) != 100 {
		t.Fatalf("got %v and balance %d, want a refusal and 100", err, balanceOf(t, pool))
	}
}
