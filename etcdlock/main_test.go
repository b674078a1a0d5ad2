package etcdlock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
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
//
// Parallel tests: a test that spends seconds waiting on leases, validity
// deadlines, backoffs or a proxy's cut, and shares nothing with other
// tests but the shared member (its keys under its own prefix(t); its own
// Client, proxy, fault injector or server), calls t.Parallel. These do
// not: a test that moves the clock of validity deadlines (the one
// package-level switch left; the controls' switches are per Client),
// counts the shared member's watchers, raises an alarm on it, compacts
// its history (TestParallelTestsCompactNoSharedMember), or keeps
// the CPU busy (the property tests, fault storms, thousands of locks,
// clusters of member processes), whose throughput, or the 1 s leases of
// the tests beside it, would suffer. go test runs those first, one at a
// time, and the parallel ones after. (TestProperty's rows run beside each
// other, each on an etcd server of its own: subtests of a test that is
// not parallel, they run before every parallel test, never beside one.)
// The parallel ones wait far more than
// they compute, so up to parallelTests run at once, on 2 cores too, unless
// -parallel says otherwise.
func TestMain(m *testing.M) {
	embedetcd.MaybeRunMember()
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
	goleak.VerifyTestMain(embedetcd.Main(m))
}

// parallelTests is how many parallel tests run at once (see TestMain):
// fewer under the race detector, which makes each several times as busy.
var parallelTests = map[bool]int{false: 6, true: 3}[raceEnabled]

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

// keysOf is the key layout under prefix(t), built by the package's own
// code (see etcdlock.KeysForTest).
func keysOf(t testing.TB) etcdlock.KeysForTest { return etcdlock.KeysUnder(prefix(t)) }

// proxied returns an etcd client whose traffic goes through a proxy the test
// can cut.
func proxied(t testing.TB) (*clientv3.Client, *netproxy.Proxy) {
	t.Helper()
	return proxiedTo(t, endpoints()[0])
}

// proxiedTo returns an etcd client that reaches the member at ep through a
// proxy the test can cut, closed when the test ends.
func proxiedTo(t testing.TB, ep string) (*clientv3.Client, *netproxy.Proxy) {
	t.Helper()
	p, err := netproxy.Start(strings.TrimPrefix(ep, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return etcdClient(t, "http://"+p.Addr()), p
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
