package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// startWorker re-executes this test binary as a worker process (the
// package's worker protocol: childproc's): env names the environment
// variable whose init hook makes it one, cfg is passed in it as JSON. The
// worker is stopped when the test ends; an exit other than status 0 or a
// kill by the test fails the test.
func startWorker(t *testing.T, env string, cfg any) *childproc.Proc {
	t.Helper()
	cmd, err := childproc.Reexec(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("worker: %v; output: %s", err, p.Output())
		}
	})
	return p
}

// next returns the payload of the worker's next report with the given
// word, failing the test if none comes within 30 s.
func next(t *testing.T, p *childproc.Proc, word string) string {
	t.Helper()
	payload, err := p.Next(30*time.Second, word)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

// ready waits until the worker holds the lock and has passed its guard's
// check, and returns its token.
func ready(t *testing.T, p *childproc.Proc) fence.Token {
	t.Helper()
	tok, err := strconv.ParseInt(next(t, p, "READY"), 10, 64)
	if err != nil {
		t.Fatalf("worker's READY report: %v", err)
	}
	return fence.Token(tok)
}

// pause freezes the worker (SIGSTOP) and returns once it is stopped.
func pause(t *testing.T, p *childproc.Proc) {
	t.Helper()
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
}

// resumeToWrite lets the paused worker write once it runs again, and
// resumes it (SIGCONT).
func resumeToWrite(t *testing.T, p *childproc.Proc) {
	t.Helper()
	if err := p.Send(childproc.Go); err != nil {
		t.Fatal(err)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
}

// workerMain is the body of a worker process: it decodes cfgJSON into a C,
// runs run bounded by a minute, and reports "RESULT ok", "RESULT stale" or
// "RESULT error: …".
func workerMain[C any](cfgJSON string, run func(context.Context, C) error) int {
	var cfg C
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	result := "ok"
	switch err := run(ctx, cfg); {
	case errors.Is(err, fence.ErrStale):
		result = "stale"
	case err != nil:
		result = "error: " + err.Error()
	}
	if err := childproc.Report(os.Stdout, "RESULT", result); err != nil {
		return 1
	}
	return 0
}

// workerLocks connects a worker process to etcd with a 1 s lease; stop
// closes both the locks (revoking the lease) and the etcd client.
func workerLocks(ctx context.Context, etcd []string) (locks *etcdlock.Client, stop func(), err error) {
	return workerLocksTTL(ctx, etcd, time.Second)
}

// workerLocksTTL is workerLocks with a lease of ttl.
func workerLocksTTL(ctx context.Context, etcd []string, ttl time.Duration) (locks *etcdlock.Client, stop func(), err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	locks, err = etcdlock.New(cli, etcdlock.WithTTL(ttl))
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return locks, func() { locks.Close(context.WithoutCancel(ctx)); cli.Close() }, nil
}

// readyThenWait reports "READY <token>" and waits for the parent's
// go-ahead on stdin; the parent freezes the worker meanwhile, past its
// lease.
func readyThenWait(tok fence.Token) error {
	if err := childproc.Report(os.Stdout, "READY", strconv.FormatInt(int64(tok), 10)); err != nil {
		return err
	}
	return childproc.AwaitGo(os.Stdin)
}

// takeOver is holder B: it takes lockName, which returns once paused A's
// lease has expired, checks that its token is above A's, and returns its
// guard with a context bounding B's work. The lock is released, and the
// client closed, when the test ends.
func takeOver(t *testing.T, endpoints []string, lockName string, tokA fence.Token) (context.Context, *fence.Guard) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	locks, stop, err := workerLocks(ctx, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	lockB, err := locks.Lock(ctx, lockName)
	if err != nil {
		t.Fatalf("B's Lock: got %v, want nil", err)
	}
	t.Cleanup(func() { lockB.Unlock(context.WithoutCancel(ctx)) })
	if lockB.Token() <= tokA {
		t.Fatalf("B's token %d is not above A's %d", lockB.Token(), tokA)
	}
	g, err := fence.NewGuard(lockB)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, g
}
