package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/embedetcd"
	"github.com/fencelock/fencelock/internal/pgtest"
)

// TestPostgresPausedHolder plays the failure fencing exists for, with real
// processes and servers: etcd for the lock, PostgreSQL for the data.
//
// Holder A, a separate process, takes the lock (1 s lease), passes its
// guard's check and is stopped with SIGSTOP. Its lease expires; holder B
// takes the lock and writes the job row. A is resumed with SIGCONT and
// writes. Fenced (a row update, or a transaction on the fence table),
// PostgreSQL refuses A's write and the row holds B's data; in the control,
// a plain UPDATE, A's stale write lands.
func TestPostgresPausedHolder(t *testing.T) {
	etcd := embedetcd.New(t, 1)
	dsn := pgtest.New(t).NewDatabase(t)
	pool := pgPool(t, dsn)
	tests := []struct {
		mode       pgMode
		wantResult string
		wantHolder string
	}{
		{pgRow, "stale", "B, the new holder"},
		{pgTx, "stale", "B, the new holder"},
		{pgNone, "ok", "A, the paused holder"},
	}
	for i, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			job := fmt.Sprintf("job-%d", i)
			if _, err := pool.Exec(t.Context(), "INSERT INTO jobs (id) VALUES ($1)", job); err != nil {
				t.Fatal(err)
			}
			cfg := pgWorkerConfig{Etcd: etcd.Endpoints(), DSN: dsn, Lock: "pg-paused-holder-" + job, Job: job, Mode: tt.mode}
			a := startPgWorker(t, cfg)
			tokA := a.ready(t)
			a.signal(t, syscall.SIGSTOP)

			locks := pgLocker(t, etcd.Endpoints())
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			lockB, err := locks.Lock(ctx, cfg.Lock) // returns once A's lease has expired
			if err != nil {
				t.Fatalf("B's Lock: got %v, want nil", err)
			}
			defer lockB.Unlock(context.WithoutCancel(ctx))
			if lockB.Token() <= tokA {
				t.Fatalf("B's token %d is not above A's %d", lockB.Token(), tokA)
			}
			g, err := fence.NewGuard(lockB)
			if err != nil {
				t.Fatal(err)
			}
			err = g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
				return pgWrite(ctx, pool, tt.mode, job, tok, "B, the new holder")
			})
			if err != nil {
				t.Fatalf("B's write: got %v, want nil", err)
			}

			a.goAhead(t)
			a.signal(t, syscall.SIGCONT)
			if got := a.result(t); got != tt.wantResult {
				t.Fatalf("A's late write: got %q, want %q", got, tt.wantResult)
			}
			var holder string
			if err := pool.QueryRow(ctx, "SELECT holder FROM jobs WHERE id = $1", job).Scan(&holder); err != nil || holder != tt.wantHolder {
				t.Fatalf("job row: got holder %q (%v), want %q", holder, err, tt.wantHolder)
			}
		})
	}
}

// pgPool returns a pool on dsn with the job table and the fence table.
func pgPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE jobs (id text PRIMARY KEY, holder text, fence bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CreateSchema(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// pgLocker returns an etcdlock client with 1 s leases, closed when the test ends.
func pgLocker(t *testing.T, endpoints []string) *etcdlock.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close(context.Background()) })
	return locks
}

// pgWorkerProc is a worker process and its pipes.
type pgWorkerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr bytes.Buffer
}

// startPgWorker re-executes this test binary as holder A; see pgWorker.
func startPgWorker(t *testing.T, cfg pgWorkerConfig) *pgWorkerProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &pgWorkerProc{cmd: exec.Command(exe), lines: make(chan string, 16)}
	w.cmd.Env = append(os.Environ(), pgWorkerEnv+"="+string(js))
	w.cmd.Stderr = &w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.lines)
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { w.finish(t) })
	return w
}

// next returns the worker's next output line starting with prefix, failing
// the test if none comes within 30 s.
func (w *pgWorkerProc) next(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("worker exited without printing %s; stderr: %s", prefix, w.stderr.String())
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
func (w *pgWorkerProc) ready(t *testing.T) fence.Token {
	t.Helper()
	tok, err := strconv.ParseInt(w.next(t, "READY"), 10, 64)
	if err != nil {
		t.Fatalf("worker's READY line: %v", err)
	}
	return fence.Token(tok)
}

func (w *pgWorkerProc) result(t *testing.T) string {
	t.Helper()
	return w.next(t, "RESULT")
}

func (w *pgWorkerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling the worker with %v: %v", sig, err)
	}
}

// goAhead lets the worker write once it runs again.
func (w *pgWorkerProc) goAhead(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		t.Fatalf("writing to the worker: %v", err)
	}
}

// finish waits for the worker to exit, killing it if it does not within
// 10 s of the test's end.
func (w *pgWorkerProc) finish(t *testing.T) {
	w.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("worker: %v; stderr: %s", err, w.stderr.String())
		}
	case <-timeout.C:
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-done
		t.Errorf("worker did not exit within 10s; killed. stderr: %s", w.stderr.String())
	}
	for range w.lines { // let the reader goroutine finish
	}
}
