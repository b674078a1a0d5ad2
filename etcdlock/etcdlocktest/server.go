package etcdlocktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// errClosed is what NewClient returns once the Server is closed.
var errClosed = errors.New("etcdlocktest: server closed")

// Server is an etcd for one test: a member inside the test process or, with
// [WithMembers], a cluster of member processes. Its methods are safe for
// concurrent use. Create one with [New] (or [Start]); the zero Server is
// not usable.
type Server struct {
	one     *embedetcd.Server  // the in-process member, or nil
	cluster *embedetcd.Cluster // the member processes, or nil
	admin   *clientv3.Client   // straight to the members, for the faults
	tmp     string             // the data dir Start made; Close removes it

	mu      sync.Mutex
	proxies map[*clientv3.Client][]*netproxy.Proxy // one per member
	closed  bool
}

// New starts a Server for t, with data in t.TempDir(), and closes it when
// the test ends (after the clients made by [Server.Client], which close
// first). It calls t.Fatal if the server does not serve within a minute or
// an option is invalid.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := start(ctx, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start is [New] for code without a testing.TB, such as examples and
// TestMain: it starts a Server with data in a new temporary directory and
// waits until it serves or ctx ends. The caller must call [Server.Close],
// which removes the directory. On failure nothing is left running.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "etcdlocktest-")
	if err != nil {
		return nil, fmt.Errorf("etcdlocktest: %w", err)
	}
	s, err := start(ctx, dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.tmp = dir
	return s, nil
}

func start(ctx context.Context, dir string, opts []Option) (*Server, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Server{proxies: map[*clientv3.Client][]*netproxy.Proxy{}}
	if o.processes {
		s.cluster, err = embedetcd.Start(ctx, dir, o.members)
	} else {
		s.one, err = embedetcd.StartServer(ctx, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("etcdlocktest: %w", err)
	}
	s.admin, err = clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		s.stopMembers()
		return nil, fmt.Errorf("etcdlocktest: %w", err)
	}
	return s, nil
}

// Endpoints returns the members' client URLs. Clients made from them
// directly (in other processes, say) bypass the per-client proxies, so
// [Server.Partition] cannot reach them.
func (s *Server) Endpoints() []string {
	if s.one != nil {
		return s.one.Endpoints()
	}
	return s.cluster.Endpoints()
}

// Close stops the members and every proxy, and removes the data directory
// [Start] made. Clients made by [Server.NewClient] stay the caller's to
// close. Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	proxies, already := s.proxies, s.closed
	s.proxies, s.closed = nil, true
	s.mu.Unlock()
	if already {
		return
	}
	for _, ps := range proxies {
		closeProxies(ps)
	}
	s.admin.Close()
	s.stopMembers()
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
}

func (s *Server) stopMembers() {
	if s.one != nil {
		s.one.Close()
	} else {
		s.cluster.Close()
	}
}
