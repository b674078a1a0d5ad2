package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// Servers says where a run's storage is. Runs keep apart by key names, so
// several runs can share the servers.
type Servers struct {
	// PostgresDSN names a database the harness may create its tables in.
	PostgresDSN string
	// S3 reaches a bucket with versioning enabled ([EnsureVersionedBucket]).
	S3 s3test.Config
}

// Run runs the workers and the nemesis against srv as cfg says, then
// checks the storage's record, and returns the report. It starts its own
// 3-member etcd cluster and stops it before returning; it re-executes this
// executable for the workers (see [MaybeRunWorker]) and for the etcd
// members (see [embedetcd.MaybeRunMember]): the executable's main, or its
// test binary's init or TestMain, calls both hooks first. The run goes on
// until it reaches cfg.Until, or for cfg.MaxDuration at most
// (Report.Capped says which);
// ctx bounds the setup, the run and the final reads. An error means the
// run could not be made or checked; violations are in the report.
func Run(ctx context.Context, srv Servers, cfg Config) (*check.Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	wl := workloadOf(cfg)
	r := &runner{cfg: cfg, srv: srv, id: runID(cfg), wl: wl, hist: newHistory(wl)}
	defer r.close()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	return r.run(ctx)
}

// runner is one run's state.
type runner struct {
	cfg   Config
	srv   Servers
	id    string
	keys  []string
	dir   string
	etcd  *embedetcd.Cluster
	redis *redistest.Server
	nats  *natstest.Server    // a run that writes check.ResJetStream's
	azure *azuritetest.Server // a run that writes check.ResAzure's
	azLog *azLog              // the proxy in front of azure, and the blobs' history
	pool  *pgxpool.Pool
	fleet *fleet
	wl    workload
	hist  *history
	fx    *effectsRun // an effects run's (KindEffects) only
	// stopped says the workers have stopped: the workload's check is the
	// final one.
	stopped bool
}

func runID(cfg Config) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	mode := "fenced"
	if !cfg.Fenced {
		mode = "control"
	}
	return fmt.Sprintf("seed%d-%s-%s", cfg.Seed, mode, hex.EncodeToString(b[:]))
}

func (r *runner) setUp(ctx context.Context) error {
	var err error
	// The run's directory holds its etcd members' data dirs and its
	// SQLite database file.
	if r.dir, err = os.MkdirTemp("", "fencecheck-run-"); err != nil {
		return err
	}
	if err := createSQLiteSchema(ctx, r.sqlitePath()); err != nil {
		return err
	}
	if r.etcd, err = embedetcd.Start(ctx, r.dir, 3); err != nil {
		return err
	}
	// The run's redis-server keeps an append-only file of every write it
	// applies (fsynced before the reply, never rewritten): the history
	// readRedis checks.
	if r.redis, err = redistest.StartIn(ctx, r.redisDir(), "--appendonly", "yes", "--appendfsync", "always",
		"--auto-aof-rewrite-percentage", "0"); err != nil {
		return fmt.Errorf("harness: starting redis-server: %w", err)
	}
	if err := r.startNATS(ctx); err != nil {
		return err
	}
	if err := r.startAzure(ctx); err != nil {
		return err
	}
	if r.pool, err = pgxpool.New(ctx, r.srv.PostgresDSN); err != nil {
		return err
	}
	for i := range r.cfg.Keys {
		r.keys = append(r.keys, fmt.Sprintf("%s-k%d", r.id, i))
	}
	if err := withSchemaLock(ctx, r.pool, func() error {
		if err := createSchema(ctx, r.pool); err != nil {
			return err
		}
		return r.wl.setUp(ctx, r)
	}); err != nil {
		return err
	}
	var members []string
	for _, m := range r.etcd.Members {
		members = append(members, strings.TrimPrefix(m.ClientURL, "http://"))
	}
	r.fleet, err = newFleet(r.workerConfig(), members, r.cfg.Workers, r.hist)
	return err
}

func (r *runner) sqlitePath() string { return filepath.Join(r.dir, "harness.db") }

func (r *runner) redisDir() string { return filepath.Join(r.dir, "redis") }

// uses reports whether the run's workload writes kind.
func (r *runner) uses(kind check.ResKind) bool { return slices.Contains(r.wl.desc().Kinds, kind) }

func (r *runner) workerConfig() workerConfig {
	return workerConfig{
		DSN: r.srv.PostgresDSN, S3: r.srv.S3, SQLite: r.sqlitePath(), Redis: r.redis.Addr(), NATS: r.natsURL(), Bucket: r.bucket(), Azure: r.azConfig(), Keys: r.keys, ResKinds: r.cfg.resKinds(), Fenced: r.cfg.Fenced, NoPreempt: r.cfg.WithoutPreemption, Election: r.cfg.Election, Kind: r.cfg.Kind, TTL: r.cfg.TTL,
		LockTimeout: r.cfg.LockTimeout, WritesPerLock: r.cfg.WritesPerLock, Seed: r.cfg.Seed, Fx: r.fxConfig(),
	}
}

// fxConfig returns an effects run's fxConfig for its workers, or nil.
func (r *runner) fxConfig() *fxConfig {
	if r.fx == nil {
		return nil
	}
	c := r.fx.cfg
	return &c
}

func (r *runner) run(ctx context.Context) (*check.Report, error) {
	start := time.Now()
	for _, s := range r.fleet.slots {
		if err := r.fleet.start(s); err != nil {
			return nil, err
		}
	}
	nctx, cancel := context.WithTimeout(ctx, r.cfg.MaxDuration)
	defer cancel()
	nem := newNemesis(&r.cfg, r.fleet, r.etcd, r.hist)
	nem.run(nctx)
	for !r.cfg.Fenced && nctx.Err() == nil {
		// The control's stopping rule is a live estimate; the storage's
		// record decides. Kinds it does not show a catch on yet go on.
		missed, err := r.uncaughtSoFar(ctx)
		if err != nil {
			return nil, err
		}
		if len(missed) == 0 {
			break
		}
		r.cfg.logf("control: the storage shows nothing caught on %v yet; going on", missed)
		r.hist.forget(missed)
		nem.run(nctx)
	}
	capped := nctx.Err() != nil
	cancel()
	r.fleet.stop()
	r.stopped = true
	events := r.hist.snapshot()
	if err := check.WriteEvents(r.cfg.Events, events); err != nil {
		return nil, err
	}
	atts := check.Attempts(events)
	rep := check.NewReport(r.wl.desc(), events, atts)
	rep.Seed, rep.Fenced, rep.Election, rep.Kind = r.cfg.Seed, r.cfg.Fenced, r.cfg.Election, r.cfg.Kind
	if r.cfg.WithoutPreemption {
		rep.Variant = "without preemption"
	}
	rep.Duration, rep.Faults, rep.FaultKinds, rep.FaultsLost = time.Since(start), nem.counted(), faultDescs(), int(nem.failed.Load())
	if capped && len(r.cfg.Until.Shortfalls(rep.Progress(), r.cfg.Fenced)) > 0 {
		rep.Capped = r.cfg.MaxDuration
	}
	vs, err := r.wl.check(ctx, r, atts)
	if err != nil {
		return nil, err
	}
	if r.fx != nil {
		rep.Applied = r.fx.applied
	}
	rep.Stalls = check.Stalls(r.wl.desc(), events, r.cfg.TTL)
	rep.Violations = append(vs, check.CheckLiveness(rep.Stalls)...)
	return rep, nil
}

// uncaughtSoFar checks the storage while the workers still write: the
// events first, so every write they acknowledge is in the storage read
// after them.
func (r *runner) uncaughtSoFar(ctx context.Context) ([]check.ResKind, error) {
	atts := check.Attempts(r.hist.snapshot())
	vs, err := r.wl.check(ctx, r, atts)
	if err != nil {
		return nil, err
	}
	return r.wl.desc().Uncaught(vs, true), nil
}

func (r *runner) readStorage(ctx context.Context) (*check.Storage, error) {
	st := check.NewStorage()
	if err := readPostgres(ctx, st, r.pool, r.keys); err != nil {
		return nil, err
	}
	c, closeIdle := r.srv.S3.NewClient()
	defer closeIdle()
	if err := readS3(ctx, st, c, r.srv.S3.Bucket, r.id+"-"); err != nil {
		return nil, err
	}
	if err := r.readEtcd(ctx, st); err != nil {
		return nil, err
	}
	if err := readSQL(ctx, st, r.sqlitePath()); err != nil {
		return nil, err
	}
	if err := readRedis(st, r.redisDir(), r.keys); err != nil {
		return nil, err
	}
	if r.nats != nil {
		if err := readJetStream(ctx, st, r.nats.URL(), r.bucket(), r.keys); err != nil {
			return nil, err
		}
	}
	if r.azLog != nil {
		r.azLog.read(st, r.keys)
	}
	return st, nil
}

// readEtcd reads the etcd keys' history from the cluster's members
// directly, not through a worker's proxies.
func (r *runner) readEtcd(ctx context.Context, st *check.Storage) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: r.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	return readEtcd(ctx, st, cli, r.keys)
}

func (r *runner) close() {
	if r.fleet != nil {
		r.fleet.stop()
		r.fleet.close()
	}
	if r.fx != nil {
		r.fx.close()
	}
	if r.pool != nil {
		r.pool.Close()
	}
	if r.etcd != nil {
		r.etcd.Close()
	}
	if r.redis != nil {
		_ = r.redis.Close()
	}
	if r.nats != nil {
		_ = r.nats.Close()
	}
	if r.azLog != nil {
		r.azLog.close()
	}
	if r.azure != nil {
		_ = r.azure.Close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}
