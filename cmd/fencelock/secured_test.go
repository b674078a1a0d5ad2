package main

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// Against etcd with client-certificate TLS and authentication, a user
// whose role has readwrite on the prefix alone can run, status and break;
// a wrong password is one clear line and exit 69.
func TestSecuredEtcd(t *testing.T) {
	t.Parallel()
	certs, err := embedetcd.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	eps := embedetcd.NewServer(t, embedetcd.WithAuthToken("simple", 2*time.Second), embedetcd.WithBcryptCost(4),
		embedetcd.WithClientTLS(certs)).Endpoints()
	tlsCfg, err := certs.ClientConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	p := prefix(t)
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "locker"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "locker", p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "locker", "lockerpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "locker", "locker"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up auth: %v", err)
		}
	}
	tlsFlags := []string{"--cacert", certs.CA, "--cert", certs.ClientCert, "--key", certs.ClientKey}

	env := tempFile(t, "env")
	args := append(append([]string{}, tlsFlags...), "--user", "locker:lockerpw", "run", "job", "--", "sh", "-c", `echo "$FENCELOCK_TOKEN" > `+env)
	if code, _, stderr := result(t, fencelock(t, eps, args...)); code != 0 || waitFile(t, env, time.Second) == "" {
		t.Fatalf("run over TLS with the prefix role: exit %d: %s", code, stderr)
	}
	args = append(append([]string{}, tlsFlags...), "status", "--json")
	cmd := fencelock(t, eps, args...)
	cmd.Env = append(cmd.Env, "ETCDCTL_USER=locker", "ETCDCTL_PASSWORD=lockerpw") // etcdctl's variables work too
	if code, out, stderr := result(t, cmd); code != 0 || !strings.Contains(out, `"locks"`) {
		t.Fatalf("status with ETCDCTL_USER/PASSWORD: exit %d, %s %s", code, out, stderr)
	}
	args = append(append([]string{}, tlsFlags...), "--user", "locker:wrong", "status")
	code, _, stderr := result(t, fencelock(t, eps, args...))
	if code != exitUnavailable || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "authentication failed") {
		t.Fatalf("wrong password: exit %d, stderr %q; want %d and one line saying authentication failed", code, stderr, exitUnavailable)
	}
	args = []string{"--cacert", certs.CA, "--user", "locker:lockerpw", "--dial-timeout", "500ms", "status"} // no client certificate
	if code, _, stderr := result(t, fencelock(t, eps, args...)); code != exitUnavailable || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("no client certificate: exit %d, stderr %q; want %d and one line", code, stderr, exitUnavailable)
	}
}
