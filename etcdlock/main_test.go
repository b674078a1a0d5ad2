package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// endpoints returns the client URLs of the embedded etcd member every test
// in this package shares.
func endpoints() []string { return embedetcd.Shared().Endpoints() }

// TestMain starts the embedded etcd member every test shares, and checks
// for leaked goroutines after it stopped. It first lets this test binary,
// re-executed by the tests' clusters of member processes, be their members.
func TestMain(m *testing.M) {
	embedetcd.MaybeRunMember()
	goleak.VerifyTestMain(embedetcd.Main(m))
}

// etcdClient returns a clientv3 client of the shared member, closed when the
// test ends.
func etcdClient(t testing.TB, eps ...string) *clientv3.Client {
	t.Helper()
	if len(eps) == 0 {
		eps = endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newLocker returns an etcdlock client with its own session, closed when the
// test ends (before its etcd client).
func newLocker(t testing.TB, cli *clientv3.Client, opts ...etcdlock.Option) *etcdlock.Client {
	t.Helper()
	opts = append([]etcdlock.Option{etcdlock.WithTTL(time.Second), etcdlock.WithPrefix(prefix(t))}, opts...)
	c, err := etcdlock.New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

var (
	prefixSeq atomic.Int64
	prefixes  sync.Map // testing.TB -> string
)

// prefix gives each test (each run of it) its own key space.
func prefix(t testing.TB) string {
	p := fmt.Sprintf("/test/%s-%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixSeq.Add(1))
	v, _ := prefixes.LoadOrStore(t, p)
	return v.(string)
}

// proxied returns an etcd client whose traffic goes through a proxy the test
// can cut.
func proxied(t testing.TB) (*clientv3.Client, *netproxy.Proxy) {
	t.Helper()
	p, err := netproxy.Start(strings.TrimPrefix(endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdClient(t, "http://"+p.Addr())
	t.Cleanup(func() { p.Close() })
	return cli, p
}

// keys returns the keys under prefix p.
func keys(t testing.TB, cli *clientv3.Client, p string) []string {
	t.Helper()
	resp, err := cli.Get(context.Background(), p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, kv := range resp.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks
}

func mustLock(t testing.TB, c *etcdlock.Client, name string) *etcdlock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatalf("Lock(%q): got %v, want nil", name, err)
	}
	return l
}

// waitClosed waits for ch to close, failing the test after d.
func waitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) time.Time {
	t.Helper()
	select {
	case <-ch:
		return time.Now()
	case <-time.After(d):
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatalf("%s: not closed after %v", what, d)
		return time.Time{}
	}
}
