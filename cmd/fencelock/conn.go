package main

import (
	"context"
	"crypto/tls"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
)

// defaultTTL is --ttl's default: etcdlock's own (WithTTL), so that a lock
// taken by fencelock and one taken by a program on the library behave alike.
const defaultTTL = 30 * time.Second

// globals are the flags every subcommand shares.
type globals struct {
	endpoints   []string
	cacert      string
	cert, key   string
	user        string
	password    string
	dialTimeout time.Duration
	prefix      string
	ttl         time.Duration
	owner       string
	metricsAddr string
}

func (g *globals) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringSliceVar(&g.endpoints, "endpoints", []string{"127.0.0.1:2379"}, "etcd endpoints, comma-separated (env FENCELOCK_ENDPOINTS, ETCDCTL_ENDPOINTS)")
	f.StringVar(&g.cacert, "cacert", "", "CA bundle to verify etcd's TLS certificate (env ..._CACERT)")
	f.StringVar(&g.cert, "cert", "", "client TLS certificate (env ..._CERT)")
	f.StringVar(&g.key, "key", "", "client TLS key (env ..._KEY)")
	f.StringVar(&g.user, "user", "", "etcd user, as USER or USER:PASSWORD (env ..._USER)")
	f.StringVar(&g.password, "password", "", "etcd password, when --user has none (env ..._PASSWORD)")
	f.DurationVar(&g.dialTimeout, "dial-timeout", 2*time.Second, "how long to wait for a connection to etcd (env ..._DIAL_TIMEOUT)")
	f.StringVar(&g.prefix, "prefix", "/fencelock/", "key prefix of the locks, as etcdlock.WithPrefix (env FENCELOCK_PREFIX)")
	f.DurationVar(&g.ttl, "ttl", defaultTTL, "lease TTL, as etcdlock.WithTTL, whose default it has (env FENCELOCK_TTL)")
	f.StringVar(&g.owner, "owner", "", "owner identity written into the lock's key (default hostname/pid; env FENCELOCK_OWNER)")
	f.StringVar(&g.metricsAddr, "metrics-addr", "", "serve the lock's metrics for Prometheus at http://ADDR/metrics, e.g. :9464 (env FENCELOCK_METRICS_ADDR)")
}

// envNames maps flags to the environment variables consulted, in order,
// when the flag is not given.
var envNames = map[string][]string{
	"endpoints":    {"FENCELOCK_ENDPOINTS", "ETCDCTL_ENDPOINTS"},
	"cacert":       {"FENCELOCK_CACERT", "ETCDCTL_CACERT"},
	"cert":         {"FENCELOCK_CERT", "ETCDCTL_CERT"},
	"key":          {"FENCELOCK_KEY", "ETCDCTL_KEY"},
	"user":         {"FENCELOCK_USER", "ETCDCTL_USER"},
	"password":     {"FENCELOCK_PASSWORD", "ETCDCTL_PASSWORD"},
	"dial-timeout": {"FENCELOCK_DIAL_TIMEOUT", "ETCDCTL_DIAL_TIMEOUT"},
	"prefix":       {"FENCELOCK_PREFIX"},
	"ttl":          {"FENCELOCK_TTL"},
	"owner":        {"FENCELOCK_OWNER"},
	"metrics-addr": {"FENCELOCK_METRICS_ADDR"},
}

// resolve fills the flags not given from the environment and checks them.
func (g *globals) resolve(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		for _, env := range envNames[f.Name] {
			if v, ok := os.LookupEnv(env); ok && v != "" {
				if serr := f.Value.Set(v); serr != nil {
					err = fail(exitUsage, "%s=%q: %v", env, v, serr)
				}
				return
			}
		}
	})
	if err != nil {
		return err
	}
	switch {
	case len(g.endpoints) == 0:
		return fail(exitUsage, "--endpoints: none given")
	case g.dialTimeout <= 0:
		return fail(exitUsage, "--dial-timeout %v: must be positive", g.dialTimeout)
	case g.ttl <= 0:
		return fail(exitUsage, "--ttl %v: must be positive", g.ttl)
	case (g.cert == "") != (g.key == ""):
		return fail(exitUsage, "--cert and --key go together")
	}
	if u, p, ok := strings.Cut(g.user, ":"); ok {
		g.user, g.password = u, p
	}
	return nil
}

// connect returns an etcd client and an etcdlock client on it; close closes
// both. It fails with exitUnavailable when etcd does not answer within the
// dial timeout.
func (g *globals) connect(ctx context.Context) (*etcdlock.Client, func(), error) {
	cfg := clientv3.Config{
		Endpoints: g.endpoints, DialTimeout: g.dialTimeout, Logger: zap.NewNop(),
		Username: g.user, Password: g.password,
	}
	if g.cacert != "" || g.cert != "" {
		tlsCfg, err := g.tls()
		if err != nil {
			return nil, nil, fail(exitUsage, "TLS: %v", err)
		}
		cfg.TLS = tlsCfg
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fail(exitUnavailable, "connect to etcd at %s: %v", strings.Join(g.endpoints, ","), err)
	}
	// clientv3.New does not wait for a connection: check that etcd answers.
	sctx, cancel := context.WithTimeout(ctx, g.dialTimeout)
	defer cancel()
	if _, err := cli.Status(sctx, g.endpoints[0]); err != nil && !reachedAny(sctx, cli, g.endpoints[1:]) {
		cli.Close()
		msg := err.Error()
		if cause := dialCause(ctx, g.endpoints, cfg.TLS, g.dialTimeout); cause != "" {
			msg += " (" + cause + ")"
		}
		return nil, nil, fail(exitUnavailable, "etcd at %s (dial timeout %v): %s", strings.Join(g.endpoints, ","), g.dialTimeout, msg)
	}
	opts := []etcdlock.Option{etcdlock.WithPrefix(g.prefix), etcdlock.WithTTL(g.ttl)}
	if g.owner != "" {
		opts = append(opts, etcdlock.WithOwner(g.owner))
	}
	stopMetrics := func() {}
	if g.metricsAddr != "" {
		opt, stop, err := serveMetrics(g.metricsAddr)
		if err != nil {
			cli.Close()
			return nil, nil, fail(exitUsage, "--metrics-addr %s: %v", g.metricsAddr, err)
		}
		opts, stopMetrics = append(opts, opt), stop
	}
	locks, err := etcdlock.New(cli, opts...)
	if err != nil {
		stopMetrics()
		cli.Close()
		return nil, nil, fail(exitUsage, "%v", err)
	}
	return locks, func() {
		// Revoking the lease frees every key at once; if etcd does not
		// answer soon, the lease expires on its own within its TTL.
		cctx, cancel := context.WithTimeout(context.Background(), min(g.ttl, 2*time.Second))
		defer cancel()
		locks.Close(cctx)
		cli.Close()
		stopMetrics()
	}, nil
}

func reachedAny(ctx context.Context, cli *clientv3.Client, eps []string) bool {
	for _, ep := range eps {
		if _, err := cli.Status(ctx, ep); err == nil {
			return true
		}
	}
	return false
}

func (g *globals) tls() (*tls.Config, error) {
	info := transport.TLSInfo{TrustedCAFile: g.cacert, CertFile: g.cert, KeyFile: g.key}
	return info.ClientConfig()
}
