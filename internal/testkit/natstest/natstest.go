// Package natstest gives tests a real NATS server with JetStream: the
// machine's nats-server (Debian's nats-server package, which .ci/setup.sh
// installs) on a free loopback port, run with -js and its store directory
// under testenv.DataDir, stopped with SIGKILL when done (it holds nothing
// worth keeping).
//
// If the environment variable FENCELOCK_NATS_URL is set (nats://host:port),
// the server it names is used instead and left running (it must have
// JetStream enabled); tests create streams with fresh names and subjects,
// and delete them.
//
// One server serves a whole test package:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(natstest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		nc := natstest.New(t).Conn(t)
//		...
//	}
//
// Without nats-server and without FENCELOCK_NATS_URL, tests that need the
// server are skipped, unless CI=true, where they fail.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvURL names the environment variable that points tests at an existing
// server instead of a throwaway one.
const EnvURL = "FENCELOCK_NATS_URL"

// howToEnable says how to get a server, in skip messages.
const howToEnable = "install nats-server (bash .ci/setup.sh, or apt-get install -y nats-server) or set " + EnvURL

// ErrUnavailable means there is no server to test against: no nats-server
// binary on PATH and FENCELOCK_NATS_URL is not set.
var ErrUnavailable = errors.New("natstest: no NATS server: install it " +
	"(apt-get install -y nats-server, or bash .ci/setup.sh) or set " + EnvURL + " to a server's nats://host:port")

// startTimeout bounds starting a server.
const startTimeout = 30 * time.Second

// attempts bounds the starts on a fresh port when the chosen one was taken
// between choosing and binding it.
const attempts = 3

var shared = &testenv.Shared[*Server]{
	Name: "natstest", Start: Start, Timeout: startTimeout, Unavailable: ErrUnavailable, HowToEnable: howToEnable,
}

// Main returns m wrapped for TestMain, as redistest.Main does: one server
// for the package's tests, stopped before goleak looks for leaked
// goroutines. See [testenv.Main] for what happens without a server.
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

// Server is a running NATS server with JetStream.
type Server struct {
	url  string
	proc *childproc.Proc // nil for a server named by FENCELOCK_NATS_URL
	dir  string
}

// Start returns a server: the one named by FENCELOCK_NATS_URL when set,
// else a nats-server it starts. ctx bounds the start. The error matches
// [ErrUnavailable] when there is neither. The caller must call
// [Server.Close].
func Start(ctx context.Context) (*Server, error) {
	if url := os.Getenv(EnvURL); url != "" {
		s := &Server{url: url}
		if err := s.ping(ctx); err != nil {
			return nil, fmt.Errorf("natstest: %s=%s: %w", EnvURL, url, err)
		}
		return s, nil
	}
	bin, err := exec.LookPath("nats-server")
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

// start runs nats-server once on a port that was free a moment ago, its
// JetStream store in a new directory under testenv.DataDir.
func start(ctx context.Context, bin string) (*Server, error) {
	dir, err := testenv.MkdirTemp("natstest")
	if err != nil {
		return nil, err
	}
	ports, err := childproc.FreePorts(1)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0]), "-js", "-sd", dir)
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{url: "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), proc: p, dir: dir}
	if err := p.AwaitReady(ctx, s.ping); err != nil {
		p.Kill()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("natstest: %w", err)
	}
	return s, nil
}

// ping connects and asks JetStream for the account's information.
func (s *Server) ping(ctx context.Context) error { return pingWith(ctx, s.url, nil) }

// URL returns the server's nats://host:port.
func (s *Server) URL() string { return s.url }

// Dir returns the server's JetStream store directory ("" for one named by
// FENCELOCK_NATS_URL).
func (s *Server) Dir() string { return s.dir }

// Conn returns a new connection to the server, closed when t ends.
func (s *Server) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("natstest: connecting to %s: %v", s.url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection to the
// server, closed when t ends.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(s.Conn(t))
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return js
}

// Close stops a server Start started (SIGKILL: it keeps nothing) and
// removes its store directory; one named by FENCELOCK_NATS_URL is left
// running.
func (s *Server) Close() error {
	if s.proc != nil {
		s.proc.Kill()
		os.RemoveAll(s.dir)
	}
	return nil
}
