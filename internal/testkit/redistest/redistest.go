// Package redistest gives tests a real Redis server: the machine's
// redis-server (Debian's redis-server package, which .ci/setup.sh
// installs) on a free loopback port, with no persistence, its working
// directory under testenv.DataDir, stopped with SIGKILL when done (it
// holds nothing worth keeping).
//
// If the environment variable FENCELOCK_REDIS_ADDR is set (host:port), the
// server it names is used instead and left running; the tests' keys are
// fresh names under "fencelock-test/", never a FLUSHALL.
//
// One server serves a whole test package:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		c := redistest.New(t).Client(t)
//		...
//	}
//
// Without redis-server and without FENCELOCK_REDIS_ADDR, tests that need
// the server are skipped, unless CI=true, where they fail.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvAddr names the environment variable that points tests at an existing
// server instead of a throwaway one.
const EnvAddr = "FENCELOCK_REDIS_ADDR"

// howToEnable says how to get a server, in skip messages.
const howToEnable = "install redis-server (bash .ci/setup.sh, or apt-get install -y redis-server) or set " + EnvAddr

// ErrUnavailable means there is no server to test against: no redis-server
// binary on PATH and FENCELOCK_REDIS_ADDR is not set.
var ErrUnavailable = errors.New("redistest: no Redis server: install it " +
	"(apt-get install -y redis-server, or bash .ci/setup.sh) or set " + EnvAddr + " to a server's host:port")

// startTimeout bounds starting a server.
const startTimeout = 30 * time.Second

// attempts bounds the starts on a fresh port when the chosen one was taken
// between choosing and binding it.
const attempts = 3

var shared = &testenv.Shared[*Server]{
	Name: "redistest", Start: Start, Timeout: startTimeout, Unavailable: ErrUnavailable, HowToEnable: howToEnable,
}

// Main returns m wrapped for TestMain, as pgtest.Main does: one server for
// the package's tests, stopped before goleak looks for leaked goroutines.
// See [testenv.Main] for what happens without a server.
func Main(m testenv.Runner) testenv.Main { return shared.Main(m) }

// Shared returns the server started by [Main], or nil outside of it (and
// when there is none). Examples, which have no *testing.T, use it.
func Shared() *Server { return shared.Get() }

// New returns the package's server started by [Main], or, without Main,
// starts one for t and stops it when t ends. When there is no server it
// skips t, or fails it when the environment variable CI is "true".
func New(t testing.TB) *Server {
	t.Helper()
	return shared.New(t)
}

// Server is a running Redis server.
type Server struct {
	addr string
	proc *childproc.Proc // nil for a server named by FENCELOCK_REDIS_ADDR
	dir  string
	keep bool // StartIn's: the directory is the caller's
}

// Start returns a server: the one named by FENCELOCK_REDIS_ADDR when set,
// else a redis-server it starts. ctx bounds the start. The error matches
// [ErrUnavailable] when there is neither. The caller must call
// [Server.Close].
func Start(ctx context.Context) (*Server, error) {
	if addr := os.Getenv(EnvAddr); addr != "" {
		s := &Server{addr: addr}
		if err := s.ping(ctx); err != nil {
			return nil, fmt.Errorf("redistest: %s=%s: %w", EnvAddr, addr, err)
		}
		return s, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrUnavailable, err)
	}
	for i := 1; ; i++ {
		s, err := start(ctx, bin)
		if err == nil || i == attempts || ctx.Err() != nil {
			return s, err
		}
	}
}

// StartIn starts a redis-server whose working directory is dir (created
// if missing, and left in place by Close), with args added to its command
// line ("--appendonly", "yes"). ctx bounds the start.
func StartIn(ctx context.Context, dir string, args ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrUnavailable, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for i := 1; ; i++ {
		s, err := startIn(ctx, bin, dir, args...)
		if err == nil {
			s.keep = true
		}
		if err == nil || i == attempts || ctx.Err() != nil {
			return s, err
		}
	}
}

// start runs redis-server once on a port that was free a moment ago, in a
// new directory under testenv.DataDir.
func start(ctx context.Context, bin string, extra ...string) (*Server, error) {
	dir, err := testenv.MkdirTemp("redistest")
	if err != nil {
		return nil, err
	}
	s, err := startIn(ctx, bin, dir, extra...)
	if err != nil {
		os.RemoveAll(dir)
	}
	return s, err
}

// startIn runs redis-server once in dir on a port that was free a moment
// ago.
func startIn(ctx context.Context, bin, dir string, extra ...string) (*Server, error) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no"}
	cmd := exec.Command(bin, append(args, extra...)...)
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		return nil, err
	}
	s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), proc: p, dir: dir}
	if err := p.AwaitReady(ctx, s.ping); err != nil {
		p.Kill()
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return s, nil
}

func (s *Server) ping(ctx context.Context) error {
	c := NewClient(s.addr)
	defer c.Close()
	return c.Ping(ctx).Err()
}

// Dir returns the server's working directory ("" for one named by
// FENCELOCK_REDIS_ADDR).
func (s *Server) Dir() string { return s.dir }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Client returns a new client of the server, closed when t ends.
func (s *Server) Client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := Options(s.addr)
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Options returns the options of a quiet client of the server at addr:
// RESP2, no client-name handshake, no maintenance notifications. Retries
// are go-redis's default (3), as users' clients have them.
func Options(addr string) *redis.Options {
	return &redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// NewClient returns a client of the server at addr with [Options]; the
// caller closes it.
func NewClient(addr string) *redis.Client { return redis.NewClient(Options(addr)) }

// Close stops a server Start started (SIGKILL: it keeps nothing) and
// removes its directory; one named by FENCELOCK_REDIS_ADDR is left
// running.
func (s *Server) Close() error {
	if s.proc != nil {
		s.proc.Kill()
		if !s.keep {
			os.RemoveAll(s.dir)
		}
	}
	return nil
}

// NewCluster starts, for t, a Redis Cluster of one node that serves every
// slot (redis-server with cluster mode on), and returns its address; a
// *redis.ClusterClient routes each command by its key's slot to it, as to
// a cluster of many. It is stopped when t ends. Without redis-server it
// skips t, or fails it under CI=true.
func NewCluster(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.NoServer(t, fmt.Errorf("%w (%v)", ErrUnavailable, err), ErrUnavailable, howToEnable)
		return ""
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	var s *Server
	for i := 1; ; i++ {
		s, err = start(ctx, bin, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		if err == nil || i == attempts || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: starting a cluster node: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := NewClient(s.addr)
	defer c.Close()
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE: %v", err)
	}
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s.addr
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redistest: the cluster did not come up: %v, %v: %s", err, ctx.Err(), info)
		case <-time.After(20 * time.Millisecond): // poll: the state has no event to wait on
		}
	}
}
