package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Cluster is a set of etcd members, each its own process, that can be
// crashed and restarted one at a time. Its methods are safe for concurrent
// use.
type Cluster struct {
	Members []*Member

	replacing sync.Mutex // held by Replace
}

// Start starts an n-member cluster with data under dir and waits until
// every member serves clients or ctx ends. On failure nothing is left
// running. The members are this executable re-executed, whose main or
// TestMain must call [MaybeRunMember].
func Start(ctx context.Context, dir string, n int) (*Cluster, error) {
	if _, ok := os.LookupEnv(MemberEnv); ok {
		return nil, errNotDiverted
	}
	if n < 1 {
		return nil, fmt.Errorf("embedetcd: %d members", n)
	}
	// The members' ports were free when chosen, but another process (a test
	// package running alongside) may take one before the member binds it:
	// then start again on fresh ports.
	for attempt := 0; ; attempt++ {
		c, err := start(ctx, filepath.Join(dir, fmt.Sprint(attempt)), n)
		if err == nil || attempt == 2 || !portTaken(err) {
			return c, err
		}
	}
}

// start is one attempt of Start, with data under dir.
func start(ctx context.Context, dir string, n int) (*Cluster, error) {
	c := &Cluster{}
	var peers []string
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		mc, err := newMemberConfig(name, filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		c.Members = append(c.Members, &Member{Name: name, ClientURL: mc.ClientURL, PeerURL: mc.PeerURL, cfg: mc})
		peers = append(peers, name+"="+mc.PeerURL)
	}
	for _, m := range c.Members {
		m.cfg.Initial = strings.Join(peers, ",")
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.start(ctx, embed.ClusterStateFlagNew) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// New starts an n-member cluster for a test, in testenv.TempDir, and closes it
// when the test ends.
func New(t testing.TB, n int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, testenv.TempDir(t), n)
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

// Stop crashes member i: SIGKILL to its process, then waits until it is
// reaped. Its data dir survives for [Cluster.Restart]. Stopping a stopped
// member does nothing.
func (c *Cluster) Stop(i int) { c.Members[i].kill() }

// Restart starts member i again, as a new process on its data dir, and
// waits until it serves or ctx ends. Restarting a running member does
// nothing. It fails if another process took the member's ports meanwhile
// (a retry may succeed once they are free) or if the rest of the cluster
// has no quorum to let it join before ctx ends.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	return c.Members[i].start(ctx, embed.ClusterStateFlagExisting)
}

// Close crashes every member. The data dirs are the caller's to remove.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.kill()
	}
}

// Running reports whether member i's process is running.
func (c *Cluster) Running(i int) bool { return c.Members[i].running() }

// Leader asks the running members, over the client API, which one leads,
// and returns its index, or -1 when none says it does before ctx ends (each
// member gets at most a second).
func (c *Cluster) Leader(ctx context.Context) int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		return -1
	}
	defer cli.Close()
	for i, m := range c.Members {
		if !m.running() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && resp.Leader != 0 && resp.Leader == resp.Header.MemberId {
			return i
		}
	}
	return -1
}
