package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// s3WorkerEnv, when set in the environment of this test binary, makes it run
// as the first lock holder of TestS3PausedHolder instead of running tests.
// Its value is the JSON of an s3WorkerConfig.
const s3WorkerEnv = "FENCELOCK_IT_S3_WORKER"

// s3WorkerConfig tells a worker process where everything is.
type s3WorkerConfig struct {
	Etcd   []string
	S3     s3test.Config
	Lock   string
	Key    string
	Fenced bool
}

// The worker runs from init, before any TestMain in this package, so that
// it starts no servers of its own.
func init() {
	if cfg := os.Getenv(s3WorkerEnv); cfg != "" {
		os.Exit(s3Worker(cfg))
	}
}

// s3Worker takes the lock, passes the guard's check, writes a first draft
// (so its store knows the object's ETag), reports "READY <token>" and waits
// for the go-ahead on stdin; the parent stops it meanwhile, past its lease. Then it
// writes again and reports "RESULT ok", "RESULT stale" or "RESULT error: …",
// followed by the HTTP status of each of its PUTs.
func s3Worker(cfgJSON string) int {
	puts := &putStatuses{}
	code := workerMain(cfgJSON, func(ctx context.Context, cfg s3WorkerConfig) error {
		return s3WorkerRun(ctx, cfg, puts)
	})
	if err := childproc.Report(os.Stdout, "PUTS", puts.String()); err != nil {
		return 1
	}
	return code
}

func s3WorkerRun(ctx context.Context, cfg s3WorkerConfig, puts *putStatuses) error {
	locks, stop, err := workerLocks(ctx, cfg.Etcd)
	if err != nil {
		return err
	}
	defer stop()
	lock, err := locks.Lock(ctx, cfg.Lock)
	if err != nil {
		return err
	}
	g, err := fence.NewGuard(lock)
	if err != nil {
		return err
	}
	client, closeIdle := cfg.S3.NewClient(s3test.WithRoundTripper(puts.wrap))
	defer closeIdle()
	store, err := s3Resource(client, cfg.S3.Bucket, cfg.Fenced)
	if err != nil {
		return err
	}
	return g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
		if err := store.Put(ctx, cfg.Key, tok, []byte("A's first draft")); err != nil {
			return fmt.Errorf("first draft: %w", err)
		}
		if err := readyThenWait(tok); err != nil {
			return err
		}
		return store.Put(ctx, cfg.Key, tok, []byte("A, the paused holder"))
	})
}

// putStatuses records the HTTP status of every PUT response to an object
// of the test (not the store's check of the server on its probe key).
type putStatuses struct {
	next  http.RoundTripper
	mu    sync.Mutex
	codes []string
}

func (p *putStatuses) wrap(next http.RoundTripper) http.RoundTripper {
	p.next = next
	return p
}

func (p *putStatuses) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if req.Method == http.MethodPut && !strings.Contains(req.URL.Path, s3fence.DefaultProbeKey) {
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		p.mu.Lock()
		p.codes = append(p.codes, code)
		p.mu.Unlock()
	}
	return resp, err
}

func (p *putStatuses) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.codes, ",")
}
