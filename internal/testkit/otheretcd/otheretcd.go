// Package otheretcd runs tests against every etcd server version users
// run, besides the embedded one (3.7) that serves every other test:
// Debian's etcd-server package (3.4) and 3.5 and 3.6 built from their own
// Go modules by .ci/install-etcd.sh (bash .ci/setup.sh installs all
// three).
package otheretcd

import (
	"context"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvEndpoint names the variable that points the tests at one etcd of
// one's own (its client URL) instead of the servers below.
const EnvEndpoint = "FENCELOCK_OTHER_ETCD"

// Servers are the versions run, and their binaries' names.
var Servers = []struct{ Version, Bin string }{
	{"3.4", "etcd"}, // Debian's etcd-server
	{"3.5", "etcd-3.5"},
	{"3.6", "etcd-3.6"},
}

// ForEach runs f, as a subtest per version, with the client URL of a
// server of each version started for the subtest, or only against the
// one at $FENCELOCK_OTHER_ETCD when that is set. Under CI=true a missing
// server fails the test; elsewhere its subtest skips, saying how to get it.
func ForEach(t *testing.T, f func(t *testing.T, endpoint string)) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		t.Run("env", func(t *testing.T) { f(t, ep) })
		return
	}
	for _, s := range Servers {
		t.Run(s.Version, func(t *testing.T) {
			bin, err := Find(s.Bin)
			if err != nil {
				testenv.Unavailable(t, err.Error(),
					"bash .ci/setup.sh installs etcd (apt-get install etcd-server) and builds etcd-3.5 and etcd-3.6 (.ci/install-etcd.sh), or set "+EnvEndpoint+" to an etcd's client URL")
			}
			f(t, Start(t, bin, s.Version, testenv.TempDir(t)).Endpoint)
		})
	}
}

// Find looks for the binary name on $PATH, in $GOBIN and in $GOPATH/bin.
func Find(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && !fi.IsDir() {
			return filepath.Join(d, name), nil
		}
	}
	return "", fmt.Errorf("no %s binary on $PATH or in %v", name, dirs)
}

// Server is an etcd server started by [Start].
type Server struct {
	Endpoint string // its client URL
	p        *childproc.Proc
}

// Stop kills the server (a test's: its data stays for a restart) and
// waits for it to exit.
func (s *Server) Stop() {
	s.p.Kill()
	s.p.Wait(5 * time.Second)
}

// Start starts the server bin, with its data in dir, on loopback ports for
// the test (stopped when the test ends), and checks it is of version.
func Start(t *testing.T, bin, version, dir string) *Server {
	t.Helper()
	ports, err := childproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--name", "other", "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "other="+peer, "--log-level", "error")
	p, err := childproc.Start(cmd, func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Endpoint: client, p: p}
	t.Cleanup(srv.Stop)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	poll.Until(t, "etcd "+version+" serving", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "health")
		return err == nil
	})
	resp, err := cli.Status(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Version, version+".") {
		t.Fatalf("%s is etcd %s, want %s", bin, resp.Version, version)
	}
	t.Logf("etcd %s at %s", resp.Version, client)
	return srv
}

// Client returns a clientv3 client of eps (quiet: no zap logger), closed
// when the test ends.
func Client(t testing.TB, eps ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
