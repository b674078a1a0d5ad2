package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/childproc"
)

// workerProc is a worker process and its pipes: a paused holder of
// TestPostgresPausedHolder or TestS3PausedHolder.
type workerProc struct {
	*childproc.Proc
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	killed bool        // by the test: its exit status is no failure
}

// startWorker re-executes this test binary as a worker process: env names
// the environment variable whose init hook makes it one, cfg is passed in it
// as JSON. The worker is waited for (or killed) when the test ends.
func startWorker(t *testing.T, env string, cfg any) *workerProc {
	t.Helper()
	cmd, err := childproc.Reexec(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProc{lines: make(chan string, 16)}
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if w.Proc, err = childproc.Start(cmd, func(line []byte) { w.lines <- string(line) }); err != nil {
		t.Fatal(err)
	}
	go func() {
		<-w.Exited()
		close(w.lines)
	}()
	t.Cleanup(func() { w.finish(t) })
	return w
}

// next returns the worker's next output line starting with prefix, failing
// the test if none comes within 30 s.
func (w *workerProc) next(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("worker exited without printing %s; stderr: %s", prefix, w.Output())
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return strings.TrimSpace(rest)
			}
		case <-timeout.C:
			t.Fatalf("worker printed no %s within 30s", prefix)
		}
	}
}

// ready waits until the worker holds the lock and has passed its guard's
// check, and returns its token.
func (w *workerProc) ready(t *testing.T) fence.Token {
	t.Helper()
	tok, err := strconv.ParseInt(w.next(t, "READY"), 10, 64)
	if err != nil {
		t.Fatalf("worker's READY line: %v", err)
	}
	return fence.Token(tok)
}

func (w *workerProc) result(t *testing.T) string {
	t.Helper()
	return w.next(t, "RESULT")
}

func (w *workerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.Signal(sig); err != nil {
		t.Fatalf("signalling the worker with %v: %v", sig, err)
	}
}

// kill kills the worker with SIGKILL, as a crash would.
func (w *workerProc) kill(t *testing.T) {
	t.Helper()
	w.killed = true
	w.signal(t, syscall.SIGKILL)
}

// goAhead lets the worker write once it runs again.
func (w *workerProc) goAhead(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		t.Fatalf("writing to the worker: %v", err)
	}
}

// finish waits for the worker to exit, killing it if it does not within
// 10 s of the test's end.
func (w *workerProc) finish(t *testing.T) {
	w.stdin.Close()
	go func() { // lines nobody reads must not hold up the reaper
		for range w.lines {
		}
	}()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case <-w.Exited():
		if err := w.Err(); err != nil && !w.killed {
			t.Errorf("worker: %v; stderr: %s", err, w.Output())
		}
	case <-timeout.C:
		_ = w.Signal(syscall.SIGCONT)
		w.Kill()
		t.Errorf("worker did not exit within 10s; killed. stderr: %s", w.Output())
	}
}

// workerMain is the body of a worker process: it decodes cfgJSON into a C,
// runs run bounded by a minute, and reports "RESULT ok", "RESULT stale" or
// "RESULT error: …" on stdout.
func workerMain[C any](cfgJSON string, run func(context.Context, C) error) int {
	var cfg C
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch err := run(ctx, cfg); {
	case err == nil:
		fmt.Println("RESULT ok")
	case errors.Is(err, fence.ErrStale):
		fmt.Println("RESULT stale")
	default:
		fmt.Println("RESULT error:", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return 0
}

// workerLocks connects a worker process to etcd with a 1 s lease; stop
// closes both the locks (revoking the lease) and the etcd client.
func workerLocks(ctx context.Context, etcd []string) (locks *etcdlock.Client, stop func(), err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	locks, err = etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return locks, func() { locks.Close(context.WithoutCancel(ctx)); cli.Close() }, nil
}

// readyThenWait reports "READY <token>" and waits for the parent's line on
// stdin; the parent freezes the worker meanwhile, past its lease.
func readyThenWait(tok fence.Token) error {
	fmt.Printf("READY %d\n", tok)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the go-ahead: %w", err)
	}
	return nil
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
