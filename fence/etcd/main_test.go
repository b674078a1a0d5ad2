package etcdfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// TestMain starts the embedded etcd member every test in this package
// shares, and checks for leaked goroutines after it stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(embedetcd.Main(m)) }

// etcdClient returns a client of the shared member, closed when the test
// ends: each one is like a separate process.
func etcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: embedetcd.Shared().Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// faulty returns a client of the shared member whose requests go through a
// fault injector.
func faulty(t testing.TB) (*clientv3.Client, *reqfault.Injector) {
	t.Helper()
	return faultyAt(t, embedetcd.Shared().Endpoints(), "")
}

// faultyAt returns a client of eps, logged in as user (password "pw")
// when not empty, whose requests go through a fault injector.
func faultyAt(t testing.TB, eps []string, user string) (*clientv3.Client, *reqfault.Injector) {
	t.Helper()
	in := reqfault.New(1)
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: in.DialOptions()}
	if user != "" {
		cfg.Username, cfg.Password = user, "pw"
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); in.Close() })
	return cli, in
}

// prefix returns a prefix no other test or run uses.
func prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "/etcdfence-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(b[:]) + "/"
}

func mustNew(t testing.TB, kv clientv3.KV, prefix string, opts ...etcdfence.Option) *etcdfence.Store {
	t.Helper()
	s, err := etcdfence.New(kv, prefix, opts...)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return s
}

// newStore returns a store under a fresh prefix with a client of its own.
func newStore(t testing.TB, opts ...etcdfence.Option) *etcdfence.Store {
	t.Helper()
	return mustNew(t, etcdClient(t), prefix(t), opts...)
}

// putsKey matches transactions that put key in a branch, or in a
// transaction nested in one.
func putsKey(key string) reqfault.Match {
	return func(_ string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		return ok && txnPuts(txn, key)
	}
}

// txnPuts reports whether txn, or a transaction nested in it, puts key.
func txnPuts(txn *pb.TxnRequest, key string) bool {
	for _, op := range append(txn.Success, txn.Failure...) {
		if p := op.GetRequestPut(); p != nil && string(p.Key) == key {
			return true
		}
		if in := op.GetRequestTxn(); in != nil && txnPuts(in, key) {
			return true
		}
	}
	return false
}

// revision returns the cluster's current revision, which every write that
// changes a key raises.
func revision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), "/etcdfence-test/no-such-key")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// rawValue returns the value of an etcd key ("" and false when missing).
func rawValue(t testing.TB, cli *clientv3.Client, key string) (string, bool) {
	t.Helper()
	resp, err := cli.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

func mustPut(t testing.TB, s *etcdfence.Store, key string, token int64, value string) {
	t.Helper()
	if err := s.Put(t.Context(), key, fenceToken(token), []byte(value)); err != nil {
		t.Fatalf("Put(%q, %d): got %v, want nil", key, token, err)
	}
}

// wantRecord fails t unless key holds value with token.
func wantRecord(t testing.TB, s *etcdfence.Store, key string, token int64, value string) {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): got %v, want token %d %q", key, err, token, value)
	}
	if int64(r.Token) != token || string(r.Value) != value {
		t.Fatalf("Get(%q): got token %d %q, want token %d %q", key, r.Token, r.Value, token, value)
	}
}

// holdPut sends s.Put(key, token, value) through in, holds its request in
// flight, and cancels its caller, which must be told the outcome is
// unknown (and must not match notAlso); the held request is delivered
// when the test releases it.
func holdPut(t *testing.T, in *reqfault.Injector, s *etcdfence.Store, key string, token fence.Token, value string, notAlso ...error) *reqfault.Held {
	t.Helper()
	held := in.Hold(putsKey(s.DataKey(key)))
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() { got <- s.Put(ctx, key, token, []byte(value)) }()
	<-held.Caught()
	cancel()
	fencewant.Unknown(t, <-got, token, notAlso...)
	return held
}
