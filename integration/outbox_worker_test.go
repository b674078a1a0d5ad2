package integration_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// outboxWorkerEnv, when set in the environment of this test binary, makes
// it run as dispatcher A of TestOutboxPausedDispatcher instead of running
// tests. Its value is the JSON of an outboxWorkerConfig.
const outboxWorkerEnv = "FENCELOCK_IT_OUTBOX_WORKER"

// dispatcherHeader names, in each request a dispatcher sends, the process
// that sent it.
const dispatcherHeader = "X-Dispatcher-Pid"

// outboxWorkerConfig tells dispatcher A where everything is.
type outboxWorkerConfig struct {
	Etcd     []string
	DSN      string
	Lock     string
	TTL      time.Duration
	Unfenced bool // the control: a loop that sends and marks with a plain UPDATE
}

func init() {
	if cfg := os.Getenv(outboxWorkerEnv); cfg != "" {
		os.Exit(workerMain(cfg, outboxWorkerRun))
	}
}

// outboxWorkerRun takes the lock, reports "READY <token>" and delivers the
// outbox's effects until its run ends (the lock lost, for the
// Dispatcher) or the parent closes its stdin.
func outboxWorkerRun(ctx context.Context, cfg outboxWorkerConfig) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	locks, stop, err := workerLocksTTL(ctx, cfg.Etcd, cfg.TTL)
	if err != nil {
		return err
	}
	defer stop()
	pool, err := pgxpool.New(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	ob, err := postgres.NewOutbox(pool)
	if err != nil {
		return err
	}
	sender, closeSender, err := pidSender()
	if err != nil {
		return err
	}
	defer closeSender()
	lock, err := locks.Lock(ctx, cfg.Lock)
	if err != nil {
		return err
	}
	if err := childproc.Report(os.Stdout, "READY", strconv.FormatInt(int64(lock.Token()), 10)); err != nil {
		return err
	}
	if cfg.Unfenced {
		return unfencedDispatch(ctx, pool, ob, sender, lock.Token())
	}
	d, err := newTestDispatcher(ob, sender)
	if err != nil {
		return err
	}
	return d.Run(ctx, lock, outbox.All)
}

// newTestDispatcher is both dispatchers' configuration: rounds of 4
// effects, one at a time, so that a pause catches A between two marks.
func newTestDispatcher(ob *postgres.Outbox, s outbox.Sender) (*outbox.Dispatcher, error) {
	return outbox.NewDispatcher(ob, s, outbox.WithBatch(4), outbox.WithConcurrency(1),
		outbox.WithPollInterval(50*time.Millisecond), outbox.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
}

// pidSender is an [outbox.HTTPSender] whose requests name this process in
// dispatcherHeader; close closes its idle connections.
func pidSender() (s *outbox.HTTPSender, closeIdle func(), err error) {
	tr := &http.Transport{}
	s, err = outbox.NewHTTPSender(outbox.WithHTTPClient(&http.Client{Transport: pidTransport{tr}}))
	return s, tr.CloseIdleConnections, err
}

// pidTransport adds dispatcherHeader to each request.
type pidTransport struct{ base http.RoundTripper }

func (p pidTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(dispatcherHeader, strconv.Itoa(os.Getpid()))
	return p.base.RoundTrip(req)
}

// unfencedDispatch is the control's stand-in for a dispatcher with its
// lock check and fenced settle taken out: rounds of 4 pending effects,
// sent one after another, then marked delivered with tok by a plain
// UPDATE, until ctx ends.
func unfencedDispatch(ctx context.Context, pool *pgxpool.Pool, ob *postgres.Outbox, s outbox.Sender, tok fence.Token) error {
	for ctx.Err() == nil {
		es, err := ob.Pending(ctx, outbox.All, nil, 4)
		if err != nil || len(es) == 0 {
			idle := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-idle.C:
			}
			continue
		}
		for _, e := range es {
			_ = s.Send(ctx, e)
		}
		for _, e := range es {
			_, _ = pool.Exec(ctx, "UPDATE fencelock_outbox SET delivered_by = $4, settled_at = now() WHERE resource = $1 AND token = $2 AND seq = $3",
				e.Resource, int64(e.Token), e.Seq, int64(tok))
		}
	}
	return nil
}
