package etcdlocktest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// Client returns a client of the server whose traffic goes through proxies
// of its own (one per member), so that [Server.Partition] cuts off this
// client alone. The client and its proxies are closed when the test ends.
// It calls t.Fatal if the server is closed.
//
// A partition of the client still in place when the test ends is healed
// then, just before the test's cleanups run (when t.Context is cancelled),
// whatever the order they were registered in: a cleanup that closes an
// etcdlock.Client on it gets its revoke answered at once instead of
// waiting out its timeout (5 s by default) on a cut-off connection.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := s.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	stopHeal := context.AfterFunc(t.Context(), func() { healAll(s.proxiesIfTracked(cli)) })
	t.Cleanup(func() {
		stopHeal()
		cli.Close()
		closeProxies(s.forget(cli))
	})
	return cli
}

// NewClient is [Server.Client] for code without a testing.TB: the caller
// closes the client; its proxies close with the Server. The client does not
// wait for a connection (no DialTimeout), and logs nothing. It fails once
// the Server is closed.
func (s *Server) NewClient() (*clientv3.Client, error) {
	var ps []*netproxy.Proxy
	var eps []string
	for _, ep := range s.Endpoints() {
		p, err := netproxy.Start(strings.TrimPrefix(ep, "http://"))
		if err != nil {
			closeProxies(ps)
			return nil, fmt.Errorf("etcdlocktest: proxy: %w", err)
		}
		ps = append(ps, p)
		eps = append(eps, "http://"+p.Addr())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
	if err == nil && !s.track(cli, ps) {
		cli.Close()
		err = errClosed
	}
	if err != nil {
		closeProxies(ps)
		return nil, err
	}
	return cli, nil
}

func (s *Server) track(cli *clientv3.Client, ps []*netproxy.Proxy) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.proxies[cli] = ps
	return true
}

// forget stops tracking cli and returns its proxies.
func (s *Server) forget(cli *clientv3.Client) []*netproxy.Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.proxies[cli]
	delete(s.proxies, cli)
	return ps
}

// proxiesOf returns cli's proxies; cli must come from this Server.
func (s *Server) proxiesOf(cli *clientv3.Client, verb string) []*netproxy.Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.proxies[cli]
	if !ok && !s.closed {
		panic("etcdlocktest: " + verb + ": the client was not made by this Server's Client or NewClient, or is closed")
	}
	return ps
}

// proxiesIfTracked returns cli's proxies, none once cli is forgotten.
func (s *Server) proxiesIfTracked(cli *clientv3.Client) []*netproxy.Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proxies[cli]
}

func healAll(ps []*netproxy.Proxy) {
	for _, p := range ps {
		p.Heal()
	}
}

func closeProxies(ps []*netproxy.Proxy) {
	for _, p := range ps {
		p.Close()
	}
}
