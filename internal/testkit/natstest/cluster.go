package natstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// NewCluster starts n nats-servers with JetStream, routed into one
// cluster, for t, and stops them when t ends. It always starts its own
// (FENCELOCK_NATS_URL names one server, not a cluster): without
// nats-server it skips t, or fails it when CI is "true". The servers are
// ready when it returns: JetStream has a meta leader.
func NewCluster(t testing.TB, n int) []*Server {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		testenv.Unavailable(t, "natstest: no nats-server for a cluster", "install nats-server (bash .ci/setup.sh, or apt-get install -y nats-server)")
	}
	dir := testenv.TempDir(t)
	ports, err := childproc.FreePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i]))
	}
	servers := make([]*Server, n)
	for i := range n {
		s, err := startNode(t, bin, dir, i, ports[i], ports[n+i], routes, "")
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	for _, s := range servers {
		if err := s.proc.AwaitReady(ctx, s.ping); err != nil {
			t.Fatalf("natstest: cluster node %s: %v", s.url, err)
		}
	}
	return servers
}

// startNode starts node i of a cluster (of none, for route 0), client
// port port, route port route, with more configuration extra, stopped
// when t ends.
func startNode(t testing.TB, bin, dir string, i, port, route int, routes []string, extra string) (*Server, error) {
	conf := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\n%s\n",
		i, port, filepath.Join(dir, "n"+strconv.Itoa(i)), extra)
	if route != 0 {
		conf += fmt.Sprintf("cluster { name: c, listen: 127.0.0.1:%d, routes: [%s] }\n", route, strings.Join(routes, ", "))
	}
	file := filepath.Join(dir, "n"+strconv.Itoa(i)+".conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	p, err := childproc.Start(exec.Command(bin, "-c", file), nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Kill)
	return &Server{url: "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), proc: p}, nil
}
