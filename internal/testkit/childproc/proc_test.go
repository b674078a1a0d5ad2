package childproc_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// childEnv makes this test binary, re-executed, a child that prints the
// lines of its configuration after a line to stderr, and sleeps.
const childEnv = "FENCELOCK_CHILDPROC_TEST"

type childConfig struct {
	Lines  []string
	Worker bool // speak the worker protocol: READY, wait for go, RESULT, exit at EOF
	Exit   bool // exit with status 0 after the lines, instead of sleeping
}

func init() {
	js := os.Getenv(childEnv)
	if js == "" {
		return
	}
	var cfg childConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "child stderr")
	if cfg.Worker {
		os.Exit(worker())
	}
	for _, l := range cfg.Lines {
		fmt.Println(l)
	}
	if cfg.Exit {
		os.Exit(0)
	}
	time.Sleep(time.Minute)
	os.Exit(3)
}

// worker reports READY, waits for the go-ahead, reports RESULT with the
// time it went ahead, and exits at EOF on stdin.
func worker() int {
	if err := childproc.Report(os.Stdout, "READY", "1"); err != nil {
		return 1
	}
	stdin := bufio.NewReader(os.Stdin)
	if err := childproc.AwaitGo(stdin); err != nil {
		return 1
	}
	if err := childproc.Report(os.Stdout, "RESULT", strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, stdin)
	return 0
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, cfg childConfig, onLine func([]byte)) *childproc.Proc {
	t.Helper()
	cmd, err := childproc.Reexec(childEnv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := childproc.Start(cmd, onLine)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestLinesThenExit(t *testing.T) {
	lines := make(chan string, 10)
	p := start(t, childConfig{Lines: []string{"a", "b"}}, func(l []byte) { lines <- string(l) })
	for _, want := range []string{"a", "b"} {
		if got := <-lines; got != want {
			t.Fatalf("line: got %q, want %q", got, want)
		}
	}
	if err := p.Err(); err != nil {
		t.Fatalf("Err before exit: got %v, want nil", err)
	}
	p.Kill()
	if p.Err() == nil {
		t.Fatal("Err after SIGKILL: got nil, want an exit error")
	}
	if got := p.Output(); got != "child stderr" {
		t.Fatalf("Output: got %q, want %q", got, "child stderr")
	}
}

func TestOutputWithoutLineHandler(t *testing.T) {
	p := start(t, childConfig{Lines: []string{"out"}}, nil)
	deadline := time.Now().Add(10 * time.Second)
	// stdout and stderr are read apart: wait for both, in either order.
	for !(strings.Contains(p.Output(), "child stderr") && strings.Contains(p.Output(), "out")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Output(); !strings.Contains(got, "out") || !strings.Contains(got, "child stderr") {
		t.Fatalf("Output: got %q, want stdout and stderr", got)
	}
}

// TestWorkerProtocol: a paused worker does nothing until resumed, even
// with its go-ahead sent, and Stop ends it with EOF and status 0.
func TestWorkerProtocol(t *testing.T) {
	p := start(t, childConfig{Worker: true}, nil)
	if got, err := p.Next(10*time.Second, "READY"); err != nil || got != "1" {
		t.Fatalf("Next(READY): got %q, %v; want \"1\", nil", got, err)
	}
	if err := p.Pause(); err != nil {
		t.Fatalf("Pause: got %v, want nil", err)
	}
	if err := p.Send(childproc.Go); err != nil {
		t.Fatalf("Send: got %v, want nil", err)
	}
	// Stopped means stopped: nothing arrives while paused.
	if got, err := p.Next(200*time.Millisecond, "RESULT"); err == nil {
		t.Fatalf("Next(RESULT) while paused: got %q, want a timeout", got)
	}
	resumed := time.Now()
	if err := p.Resume(); err != nil {
		t.Fatalf("Resume: got %v, want nil", err)
	}
	got, err := p.Next(10*time.Second, "RESULT")
	if err != nil {
		t.Fatalf("Next(RESULT): got %v, want nil", err)
	}
	if ns, _ := strconv.ParseInt(got, 10, 64); time.Unix(0, ns).Before(resumed) {
		t.Fatalf("the worker went ahead at %v, before it was resumed at %v", time.Unix(0, ns), resumed)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop: got %v, want nil", err)
	}
}

// TestStopKillsAHungChild: a child that ignores EOF is killed, and Stop
// says so; a child ended by Kill is no failure.
func TestStopKillsAHungChild(t *testing.T) {
	p := start(t, childConfig{}, nil) // sleeps a minute
	if err := p.Stop(100 * time.Millisecond); !errors.Is(err, childproc.ErrRunning) {
		t.Fatalf("Stop: got %v, want ErrRunning", err)
	}
	q := start(t, childConfig{}, nil)
	q.Kill()
	if err := q.Stop(time.Second); err != nil {
		t.Fatalf("Stop after Kill: got %v, want nil", err)
	}
}

// TestNextAfterExit: reports printed just before the exit are still read;
// a missing one is an error, not a hang.
func TestNextAfterExit(t *testing.T) {
	p := start(t, childConfig{Lines: []string{"A x", "B y"}, Exit: true}, nil)
	if err := p.Wait(10 * time.Second); err != nil {
		t.Fatalf("Wait: got %v, want nil", err)
	}
	if got, err := p.Next(time.Second, "B"); err != nil || got != "y" {
		t.Fatalf("Next(B): got %q, %v; want \"y\", nil", got, err)
	}
	if _, err := p.Next(time.Second, "C"); err == nil {
		t.Fatal("Next(C) after exit: got nil, want an error")
	}
}
