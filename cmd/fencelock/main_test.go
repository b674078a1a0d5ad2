package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// The tests run fencelock as real processes: this test binary, re-executed
// with cliEnv set, is the fencelock command; with testChildEnv set it is a
// child command of the tests' own (see child_test.go).
const (
	cliEnv       = "FENCELOCK_CLI_TEST_MAIN"
	testChildEnv = "FENCELOCK_CLI_TEST_CHILD"
	// startHookEnv, set to a file's path, makes the fencelock command
	// write that file just before it starts its command, then wait for a
	// signal (see holdStart).
	startHookEnv = "FENCELOCK_CLI_TEST_START_HOOK"
)

// etcdEndpoints returns the client URLs of the embedded etcd all tests
// share.
func etcdEndpoints() []string { return embedetcd.Shared().Endpoints() }

func TestMain(m *testing.M) {
	if what := os.Getenv(testChildEnv); what != "" { // first: a child inherits cliEnv
		os.Exit(testChild(what))
	}
	if os.Getenv(cliEnv) == "1" {
		if path := os.Getenv(startHookEnv); path != "" {
			startHook = holdStart(path)
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(embedetcd.Main(m))
}

// fencelock returns the command fencelock args, against the shared etcd
// (or eps), with the test's own prefix.
func fencelock(t *testing.T, eps []string, args ...string) *exec.Cmd {
	t.Helper()
	if eps == nil {
		eps = etcdEndpoints()
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1",
		"FENCELOCK_ENDPOINTS="+strings.Join(eps, ","), "FENCELOCK_PREFIX="+prefix(t), "FENCELOCK_TTL=1s")
	cmd.Stderr = new(bytes.Buffer) // waitExit shows it; a test may set its own
	return cmd
}

// result runs cmd and returns its exit status, stdout and stderr.
func result(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func prefix(t *testing.T) string {
	return "/clitest/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

// locker returns a library client on the same etcd and prefix as the
// test's fencelock commands.
func locker(t *testing.T, opts ...etcdlock.Option) (*etcdlock.Client, *clientv3.Client) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdEndpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]etcdlock.Option{etcdlock.WithPrefix(prefix(t)), etcdlock.WithTTL(time.Second)}, opts...)
	c, err := etcdlock.New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()); cli.Close() })
	return c, cli
}

// waitFile polls until path exists and returns its content.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not written within %v", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExit waits for a started command to exit and returns its status.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(within):
		// SIGABRT, which fencelock does not catch, makes Go print every
		// goroutine's stack before it exits: where it hung.
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGABRT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		var stderr string
		if b, ok := cmd.Stderr.(*bytes.Buffer); ok {
			stderr = b.String()
		}
		t.Fatalf("fencelock did not exit within %v; its stderr, with its goroutines' stacks:\n%s", within, stderr)
		return -1
	}
}

func tempFile(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

// holdStart is a startHook that writes path, then waits (up to a minute)
// until fencelock has received one of the signals it forwards: a test's
// way to send one after the lock is taken and before the command starts.
func holdStart(path string) func(*signals) {
	return func(s *signals) {
		if err := os.WriteFile(path, []byte("ready"), 0o644); err != nil {
			panic(err)
		}
		for deadline := time.Now().Add(time.Minute); s.received() == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
}
