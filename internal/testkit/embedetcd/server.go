package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Server is one etcd member running inside this process. Nothing stops it
// before [Server.Close]; a test that crashes or restarts members uses a
// [Cluster] instead. Its methods are safe for concurrent use.
type Server struct {
	e         *embed.Etcd
	clientURL string
}

// StartServer starts a one-member etcd in this process with data under dir
// and waits until it serves clients or ctx ends (nothing is left running
// then).
func StartServer(ctx context.Context, dir string, opts ...Option) (*Server, error) {
	var o config
	for _, opt := range opts {
		opt.apply(&o)
	}
	// The ports were free when chosen, but another process (a test binary
	// beside this one, an outgoing connection's ephemeral port) can take
	// one before etcd listens: then new ports, and a data dir of their own.
	for try := 0; ; try++ {
		sub := "m0"
		if try > 0 {
			sub = fmt.Sprintf("m0-%d", try)
		}
		mc, err := newMemberConfig("m0", filepath.Join(dir, sub))
		if err != nil {
			return nil, err
		}
		if o.tls != nil {
			mc.ClientURL = "https" + strings.TrimPrefix(mc.ClientURL, "http")
		}
		mc.Initial = mc.Name + "=" + mc.PeerURL
		e, err := startEmbedded(ctx, mc, o)
		if err != nil {
			if try < 4 && portTaken(err) {
				continue
			}
			return nil, err
		}
		return &Server{e: e, clientURL: mc.ClientURL}, nil
	}
}

// portTaken reports whether err is a listen on a port another process
// holds.
func portTaken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// NewServer starts a one-member etcd in this process for a test, in
// testenv.TempDir, and closes it when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := StartServer(ctx, testenv.TempDir(t), opts...)
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Endpoints returns the member's client URL.
func (s *Server) Endpoints() []string { return []string{s.clientURL} }

// Close stops the member, waiting at most 10 s. Closing twice is harmless.
func (s *Server) Close() {
	done := make(chan struct{})
	go func() {
		s.e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}
