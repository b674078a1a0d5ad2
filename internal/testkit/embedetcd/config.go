package embedetcd

import (
	"context"
	"fmt"
	"net/url"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// Heartbeat and election settings of every member. With these, etcd's
// minimum lease TTL (1.5 election timeouts, rounded up to a second) is 1 s.
const (
	TickMs     = 10
	ElectionMs = 100
)

// memberConfig is what a member needs to start, in this process or in a
// member process (as JSON in [MemberEnv]).
type memberConfig struct {
	Name      string
	Dir       string
	ClientURL string
	PeerURL   string
	Initial   string // the initial cluster: name=peerURL,...
	State     string // embed.ClusterStateFlagNew or ClusterStateFlagExisting
}

func (mc memberConfig) embed() (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = mc.Name
	cfg.Dir = mc.Dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = TickMs, ElectionMs
	cu, err := url.Parse(mc.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(mc.PeerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = mc.Initial
	cfg.InitialClusterToken = "fencelock-test"
	cfg.ClusterState = mc.State
	cfg.Metrics = "basic"
	// etcd's strict check refuses to remove a member (or add one) until
	// the voters that stay have been connected for 5 s (its
	// HealthInterval): after a member's restart or replacement, each
	// replacement waited 5 s, a quarter of the fault harness's run. What
	// the check guards, that the members that stay are up and in touch
	// with the leader, Cluster.Replace checks itself before each removal,
	// without the 5 s (see Replace). Nothing else here changes members.
	cfg.StrictReconfigCheck = false
	return cfg, nil
}

// startEmbedded starts mc in this process and waits until it serves
// clients or ctx ends.
func startEmbedded(ctx context.Context, mc memberConfig, o config) (*embed.Etcd, error) {
	cfg, err := mc.embed()
	if err != nil {
		return nil, err
	}
	o.applyTo(cfg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start %s: %w", mc.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: %s: %w", mc.Name, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedetcd: %s not ready: %w", mc.Name, ctx.Err())
	}
}

// newMemberConfig returns the configuration of a new member named name with
// data under dir, on two loopback ports that were free a moment ago.
func newMemberConfig(name, dir string) (memberConfig, error) {
	ports, err := childproc.FreePorts(2)
	if err != nil {
		return memberConfig{}, fmt.Errorf("embedetcd: %w", err)
	}
	return memberConfig{
		Name:      name,
		Dir:       dir,
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		State:     embed.ClusterStateFlagNew,
	}, nil
}
