package childproc_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/childproc"
)

// childEnv makes this test binary, re-executed, a child that prints the
// lines of its configuration after a line to stderr, and sleeps.
const childEnv = "FENCELOCK_CHILDPROC_TEST"

type childConfig struct {
	Lines []string
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
	for _, l := range cfg.Lines {
		fmt.Println(l)
	}
	time.Sleep(time.Minute)
	os.Exit(3)
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
	for !strings.Contains(p.Output(), "child stderr") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Output(); !strings.Contains(got, "out") || !strings.Contains(got, "child stderr") {
		t.Fatalf("Output: got %q, want stdout and stderr", got)
	}
}
