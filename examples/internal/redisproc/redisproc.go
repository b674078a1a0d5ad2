// Package redisproc runs a throwaway Redis server for the lessons and their
// tests: the machine's redis-server (Debian's redis-server package) on a
// free loopback port, with its files in a temp dir, no persistence, and
// stopped with SIGKILL when done (it holds nothing worth keeping).
//
// If the environment variable FENCELOCK_REDIS_ADDR is set (host:port), the
// server it names is used instead and left running.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// EnvAddr names the environment variable that points at an existing server
// instead of a throwaway one.
const EnvAddr = "FENCELOCK_REDIS_ADDR"

// ErrUnavailable means there is no server to run against: no redis-server
// binary on PATH and FENCELOCK_REDIS_ADDR is not set.
var ErrUnavailable = errors.New("redisproc: no Redis server: install it " +
	"(apt-get install -y redis-server, or bash .ci/setup.sh) or set " + EnvAddr + " to a server's host:port")

// HowToEnable says how to get a server, for testenv.NoServer.
const HowToEnable = "install redis-server (bash .ci/setup.sh) or set " + EnvAddr

// attempts bounds the starts on a fresh port when the chosen one was taken
// between choosing and binding it.
const attempts = 3

// Server is a running Redis server.
type Server struct {
	addr string
	proc *childproc.Proc // nil for a server named by FENCELOCK_REDIS_ADDR
}

// Start returns a server: the one named by FENCELOCK_REDIS_ADDR when set,
// else a redis-server it starts with dir as its working directory. ctx
// bounds the start. The error matches [ErrUnavailable] when there is
// neither. The caller must call [Server.Close].
func Start(ctx context.Context, dir string) (*Server, error) {
	if addr := os.Getenv(EnvAddr); addr != "" {
		s := &Server{addr: addr}
		if err := s.ping(ctx); err != nil {
			return nil, fmt.Errorf("redisproc: %s=%s: %w", EnvAddr, addr, err)
		}
		return s, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrUnavailable, err)
	}
	for i := 1; ; i++ {
		s, err := start(ctx, bin, dir)
		if err == nil || i == attempts || ctx.Err() != nil {
			return s, err
		}
	}
}

// start runs redis-server once on a port that was free a moment ago.
func start(ctx context.Context, bin, dir string) (*Server, error) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no")
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		return nil, err
	}
	s := &Server{addr: "127.0.0.1:" + strconv.Itoa(ports[0]), proc: p}
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.ping(pctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-p.Exited(): // the port was taken, most likely
			return nil, fmt.Errorf("redisproc: redis-server exited: %v: %s", p.Err(), p.Output())
		case <-ctx.Done():
			p.Kill()
			return nil, fmt.Errorf("redisproc: redis-server not answering: %w: %s", ctx.Err(), p.Output())
		case <-time.After(10 * time.Millisecond): // poll: the server says nothing when it is ready that we could wait on
		}
	}
}

func (s *Server) ping(ctx context.Context) error {
	c := s.Client()
	defer c.Close()
	return c.Ping(ctx).Err()
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client() *redis.Client { return NewClient(s.addr) }

// NewClient returns a client of the server at addr, quiet and plain: RESP2,
// no client-name handshake, no maintenance notifications.
func NewClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// Close stops a server Start started (SIGKILL: it keeps nothing); one named
// by FENCELOCK_REDIS_ADDR is left running.
func (s *Server) Close() {
	if s.proc != nil {
		s.proc.Kill()
	}
}
