package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// secured is an embedded etcd member run as in production: authentication
// on, a user "locker" whose role "locker" has readwrite on one key prefix
// only, and optionally client-certificate TLS.
type secured struct {
	eps   []string
	certs *embedetcd.Certs // nil: plain HTTP
}

// Passwords of the users secureEtcd creates.
const (
	rootPassword   = "root-pw"
	lockerPassword = "locker-pw"
)

// secureEtcd starts a member whose simple auth tokens live tokenTTL unused,
// with TLS when withTLS is set, and gives the role "locker" readwrite on
// the keys under grant.
func secureEtcd(t *testing.T, tokenTTL time.Duration, withTLS bool, grant string) *secured {
	t.Helper()
	opts := []embedetcd.Option{embedetcd.WithAuthToken("simple", tokenTTL), embedetcd.WithBcryptCost(4)}
	s := &secured{}
	if withTLS {
		certs, err := embedetcd.NewCerts(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s.certs = certs
		opts = append(opts, embedetcd.WithClientTLS(certs))
	}
	s.eps = embedetcd.NewServer(t, opts...).Endpoints()
	root := s.client(t, clientv3.Config{}, true)
	ctx := t.Context()
	steps := []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "locker"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "locker", grant, clientv3.GetPrefixRangeEnd(grant),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "locker", lockerPassword); return err },
		func() error { _, err := root.UserGrantRole(ctx, "locker", "locker"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("setting up auth: %v", err)
		}
	}
	return s
}

// locker returns a client logged in as "locker", with a client certificate
// if the server uses TLS, whose requests go through in (if not nil).
func (s *secured) locker(t *testing.T, in *reqfault.Injector) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Username: "locker", Password: lockerPassword}
	if in != nil {
		cfg.DialOptions = in.DialOptions()
	}
	return s.client(t, cfg, true)
}

// client completes cfg (endpoints, TLS with or without the client
// certificate) and returns the client, closed when the test ends.
func (s *secured) client(t *testing.T, cfg clientv3.Config, withCert bool) *clientv3.Client {
	t.Helper()
	cfg.Endpoints, cfg.DialTimeout, cfg.Logger = s.eps, 5*time.Second, zap.NewNop()
	if s.certs != nil {
		var err error
		if cfg.TLS, err = s.certs.ClientConfig(withCert); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// faultyLocker returns a "locker" client whose requests go through a fresh
// injector, used to count them.
func (s *secured) faultyLocker(t *testing.T, seed uint64) (*clientv3.Client, *reqfault.Injector) {
	t.Helper()
	in := reqfault.New(seed)
	t.Cleanup(in.Close) // after the client is closed: cleanups run last in, first out
	return s.locker(t, in), in
}

// waitGone waits until no key is under p.
func waitGone(t *testing.T, cli *clientv3.Client, p string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		resp, err := cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("keys under %q: %v", p, err)
		}
		if resp.Count == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kvRequests counts the KV requests a client sent.
func kvRequests(in *reqfault.Injector) int {
	return in.Calls("KV/Range") + in.Calls("KV/Txn") + in.Calls("KV/Put") + in.Calls("KV/DeleteRange")
}

// waiterRequests counts the reads and watches a client sent: KV requests,
// watch streams opened, and watch creates and cancels sent on them.
func waiterRequests(in *reqfault.Injector) int {
	return kvRequests(in) + in.Calls("Watch/Watch") + in.Sent("Watch/Watch")
}
