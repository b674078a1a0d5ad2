package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// memberCallTimeout bounds each membership request of [Cluster.Replace].
const memberCallTimeout = 2 * time.Second

// Replace swaps member i for a new member through etcd's membership API,
// one change at a time, so a cluster of three never has fewer than two
// voting members up: MemberRemove of i (the leader too: it steps down once
// the removal is applied), SIGKILL of its process, its data dir wiped,
// MemberAddAsLearner of the new member, the new member started on the empty
// dir with initial-cluster-state=existing, and MemberPromote retried until
// the learner has caught up with the leader. It returns once the new member
// votes and serves requests itself, or an error when ctx ends first; the cluster is then left with
// member i removed or still a learner, and a later Replace of i finishes the
// job.
//
// The new member is a new member to etcd (a new ID, an empty data dir,
// caught up from the leader) but keeps member i's name and URLs, as a
// replacement machine given the old one's address would: so every
// [Cluster.Endpoints] taken before stays valid, and a proxy pointed at
// member i reaches its replacement. Each membership request is retried
// until its effect is seen, since a request can take effect and lose its
// reply: a removal that finds i gone, an add that finds its peer URL
// added, a promotion that finds a voter, all count as done.
//
// Before the removal, Replace waits until every member that stays answers
// a linearizable read itself (it is up and in touch with the leader), so
// that the removal never leaves two voters of which one is down. That is
// the guard of etcd's strict reconfiguration check, which the members run
// without: it refused the removal ("unhealthy cluster") until the members
// that stay had been connected for 5 s, so each replacement soon after a
// start, a restart or another replacement took 5 s, where the change
// itself takes a fraction of a second.
//
// Replace must not run alongside [Cluster.Stop] of another member: two
// members down at once out of three is a loss of quorum. It waits until
// the stopped member is back, or ctx ends. Concurrent calls of Replace are
// serialised.
func (c *Cluster) Replace(ctx context.Context, i int) error {
	return c.replace(ctx, i, false)
}

// Move is [Cluster.Replace] onto new addresses: the new member listens on
// fresh client and peer ports, as a replacement machine with an address
// of its own does, and member i's ClientURL and PeerURL change to them
// before the new member is added. Endpoints taken before no longer reach
// it: a client follows the cluster only if it syncs its endpoints
// (clientv3's AutoSyncInterval or Sync). Member i's URLs must not be read
// while Move runs.
func (c *Cluster) Move(ctx context.Context, i int) error {
	return c.replace(ctx, i, true)
}

func (c *Cluster) replace(ctx context.Context, i int, move bool) error {
	if i < 0 || i >= len(c.Members) {
		return fmt.Errorf("embedetcd: replace member %d of %d", i, len(c.Members))
	}
	c.replacing.Lock()
	defer c.replacing.Unlock()
	m := c.Members[i]
	var others []string
	for j, o := range c.Members {
		if j != i {
			others = append(others, o.ClientURL)
		}
	}
	// The client talks only to the members that stay: member i's endpoint is
	// dead or a learner for most of the change.
	cli, err := clientv3.New(clientv3.Config{Endpoints: others, DialTimeout: memberCallTimeout, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("embedetcd: replace %s: %w", m.Name, err)
	}
	defer cli.Close()
	for _, u := range others {
		if err := awaitVoter(ctx, u); err != nil {
			return fmt.Errorf("embedetcd: replace %s: member %s does not serve, and a removal would leave the cluster without quorum: %w", m.Name, u, err)
		}
	}
	if err := removeMember(ctx, cli, m.PeerURL); err != nil {
		return fmt.Errorf("embedetcd: replace %s: remove: %w", m.Name, err)
	}
	m.kill()
	if err := os.RemoveAll(m.cfg.Dir); err != nil {
		return fmt.Errorf("embedetcd: replace %s: %w", m.Name, err)
	}
	if move {
		mc, err := newMemberConfig(m.Name, m.cfg.Dir)
		if err != nil {
			return fmt.Errorf("embedetcd: move %s: %w", m.Name, err)
		}
		m.mu.Lock()
		m.cfg.ClientURL, m.cfg.PeerURL = mc.ClientURL, mc.PeerURL
		m.ClientURL, m.PeerURL = mc.ClientURL, mc.PeerURL
		m.mu.Unlock()
	}
	id, err := addLearner(ctx, cli, m.PeerURL)
	if err != nil {
		return fmt.Errorf("embedetcd: replace %s: add learner: %w", m.Name, err)
	}
	m.mu.Lock()
	m.cfg.Initial = c.initialCluster()
	m.mu.Unlock()
	if err := m.start(ctx, embed.ClusterStateFlagExisting); err != nil {
		return fmt.Errorf("embedetcd: replace %s: start learner: %w", m.Name, err)
	}
	if err := promote(ctx, cli, id); err != nil {
		return fmt.Errorf("embedetcd: replace %s: promote learner %x: %w", m.Name, id, err)
	}
	// The promotion is committed once MemberPromote answers, but the new
	// member applies it a moment later and refuses requests as a learner
	// until then ("rpc not supported for learner").
	if err := awaitVoter(ctx, m.ClientURL); err != nil {
		return fmt.Errorf("embedetcd: replace %s: promoted, but it does not serve: %w", m.Name, err)
	}
	return nil
}

// awaitVoter waits until the member at clientURL answers a linearizable
// read itself, which a learner refuses.
func awaitVoter(ctx context.Context, clientURL string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: memberCallTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	return retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := cli.Get(ctx, "embedetcd-voter-probe")
		return err == nil, err
	})
}

// initialCluster returns the members as etcd's initial-cluster flag lists
// them: name=peerURL,...
func (c *Cluster) initialCluster() string {
	var peers []string
	for _, m := range c.Members {
		peers = append(peers, m.Name+"="+m.PeerURL)
	}
	return strings.Join(peers, ",")
}

// removeMember removes the member with peerURL, if the cluster has one.
func removeMember(ctx context.Context, cli *clientv3.Client, peerURL string) error {
	return retry(ctx, func(ctx context.Context) (bool, error) {
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return false, err
		}
		m := withPeerURL(ms.Members, peerURL)
		if m == nil {
			return true, nil
		}
		_, err = cli.MemberRemove(ctx, m.ID)
		return err == nil || errors.Is(err, rpctypes.ErrMemberNotFound), err
	})
}

// addLearner adds a learner with peerURL, unless the cluster has a member
// with it already (an earlier attempt's, whose reply was lost), and returns
// its ID.
func addLearner(ctx context.Context, cli *clientv3.Client, peerURL string) (uint64, error) {
	var id uint64
	err := retry(ctx, func(ctx context.Context) (bool, error) {
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return false, err
		}
		if m := withPeerURL(ms.Members, peerURL); m != nil {
			id = m.ID
			return true, nil
		}
		resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err != nil {
			return false, err
		}
		id = resp.Member.ID
		return true, nil
	})
	return id, err
}

// promote promotes learner id to a voting member, retrying while it has not
// caught up with the leader.
func promote(ctx context.Context, cli *clientv3.Client, id uint64) error {
	return retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := cli.MemberPromote(ctx, id)
		if err == nil || errors.Is(err, rpctypes.ErrMemberNotLearner) {
			return true, nil
		}
		return false, err // rpctypes.ErrMemberLearnerNotReady while it catches up
	})
}

func withPeerURL(ms []*etcdserverpb.Member, peerURL string) *etcdserverpb.Member {
	for _, m := range ms {
		for _, u := range m.PeerURLs {
			if u == peerURL {
				return m
			}
		}
	}
	return nil
}

// retry calls try, each call bounded by memberCallTimeout, until it reports
// done, then 100 ms apart, until ctx ends; the error is then the last
// attempt's.
func retry(ctx context.Context, try func(context.Context) (bool, error)) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		done, err := try(cctx)
		cancel()
		if done {
			return nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		}
	}
}
