// Package embedetcd runs etcd members inside the current process for tests
// and the demo: temp data dirs, random loopback ports, a quiet logger and
// short heartbeat/election settings so leases of one second are granted and
// leaders are elected in tens of milliseconds.
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Heartbeat and election settings of every member. With these, etcd's
// minimum lease TTL (1.5 election timeouts, rounded up to a second) is 1 s.
const (
	TickMs     = 10
	ElectionMs = 100
)

// Member is one etcd member of a [Cluster].
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	dir       string

	mu sync.Mutex
	e  *embed.Etcd
}

// Cluster is a set of embedded etcd members that can be stopped and
// restarted one at a time. Its methods are safe for concurrent use.
type Cluster struct {
	Members []*Member
	initial string
	cfg     config
}

// Start starts an n-member cluster with data under dir and waits until it
// serves clients or ctx ends.
func Start(ctx context.Context, dir string, n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("embedetcd: %d members", n)
	}
	c := &Cluster{}
	for _, o := range opts {
		o.apply(&c.cfg)
	}
	scheme := "http"
	if c.cfg.tls != nil {
		scheme = "https"
	}
	var peers []string
	for i := range n {
		cp, pp, err := freePorts()
		if err != nil {
			return nil, err
		}
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, cp),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", pp),
			dir:       filepath.Join(dir, fmt.Sprintf("m%d", i)),
		}
		c.Members = append(c.Members, m)
		peers = append(peers, m.Name+"="+m.PeerURL)
	}
	c.initial = strings.Join(peers, ",")
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.start(ctx, c.initial, embed.ClusterStateFlagNew, c.cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// New starts an n-member cluster for a test, in t.TempDir(), and closes it
// when the test ends.
func New(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, t.TempDir(), n, opts...)
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Endpoints returns the client URLs of all members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Stop stops member i abruptly: raft stops without handing leadership over,
// so its peers see it as crashed (its data dir survives for Restart).
func (c *Cluster) Stop(i int) { c.Members[i].stop() }

// Restart starts member i again from its data dir and waits until it serves.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	return c.Members[i].start(ctx, c.initial, embed.ClusterStateFlagExisting, c.cfg)
}

// Close stops every member.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.stop()
	}
}

// Running reports whether member i is running.
func (c *Cluster) Running(i int) bool {
	m := c.Members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil
}

// Leader returns the index of the member that believes it leads, or -1.
func (c *Cluster) Leader() int {
	for i, m := range c.Members {
		m.mu.Lock()
		e := m.e
		m.mu.Unlock()
		if e != nil && e.Server.Leader() == e.Server.MemberID() {
			return i
		}
	}
	return -1
}

func (m *Member) start(ctx context.Context, initial, state string, o config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e != nil {
		return nil
	}
	cfg, err := m.config(initial, state)
	if err != nil {
		return err
	}
	o.applyTo(cfg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("embedetcd: start %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("embedetcd: %s: %w", m.Name, err)
	case <-ctx.Done():
		e.Close()
		return fmt.Errorf("embedetcd: %s not ready: %w", m.Name, ctx.Err())
	}
	m.e = e
	return nil
}

func (m *Member) config(initial, state string) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = TickMs, ElectionMs
	cu, err := url.Parse(m.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(m.PeerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = "fencelock-test"
	cfg.ClusterState = state
	cfg.Metrics = "basic"
	return cfg, nil
}

func (m *Member) stop() {
	m.mu.Lock()
	e := m.e
	m.e = nil
	m.mu.Unlock()
	if e == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		// HardStop first: no leadership handoff, no draining, as in a crash.
		e.Server.HardStop()
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// freePorts returns two loopback ports that were free a moment ago.
func freePorts() (int, int, error) {
	var ports [2]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, fmt.Errorf("embedetcd: free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}
