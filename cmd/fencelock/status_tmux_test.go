package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// status --watch on a terminal (tmux's): the screen follows the lock as it
// changes hands, and Ctrl-C leaves the alternate screen, the table gone,
// with exit status 0.
func TestStatusWatchTerminal(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	a, _ := locker(t, etcdlock.WithOwner("holder-a"))
	b, _ := locker(t, etcdlock.WithOwner("waiter-b"))
	la, err := a.Lock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	tm.start(fencelock(t, nil, "status", "--watch", "job"))
	poll.Until(t, "a shown holding", func() bool { return shows(tm.screen(), "job", "holder", "holder-a", la.Token()) })
	if screen := tm.screen(); !strings.Contains(screen, "fencelock status --watch") || !strings.Contains(screen, "rev ") {
		t.Fatalf("no header with the endpoint and revision on the screen:\n%s", screen)
	}
	got := make(chan *etcdlock.Lock, 1)
	go func() {
		lb, _ := b.Lock(t.Context(), "job")
		got <- lb
	}()
	poll.Until(t, "b shown waiting", func() bool { role, _ := row(tm.screen(), "job", "waiter-b"); return role == "waiter" })
	la.Unlock(t.Context())
	lb := <-got
	if lb == nil {
		t.Fatal("b's Lock failed")
	}
	poll.Until(t, "b shown holding, a gone", func() bool {
		screen := tm.screen()
		return shows(screen, "job", "holder", "waiter-b", lb.Token()) && !strings.Contains(screen, "holder-a")
	})
	t.Logf("the screen:\n%s", tm.last)
	tm.run("send-keys", "-t", "s", "C-c")
	status := tm.exitStatus()
	if status != "0/" {
		t.Errorf("exit status/signal after Ctrl-C: got %q, want 0 and none; screen:\n%s", status, tm.screen())
	}
	if alt := tm.run("display-message", "-p", "-t", "s", "#{alternate_on}"); alt != "0" {
		t.Errorf("alternate screen still on after exit (alternate_on %q)", alt)
	}
	screen := tm.screen()
	if strings.Contains(screen, "KIND") || strings.Contains(screen, "waiter-b") {
		t.Errorf("the table is still on the screen after exit:\n%s", screen)
	}
	t.Logf("the screen after exit:\n%s", screen)
}

// tmux is a tmux server of the test's own, with one session, s, whose pane
// stays after its command exits so that its exit status can be read.
type tmux struct {
	t    *testing.T
	path string // tmux's
	sock string // -L's socket name
	conf string // the server's configuration
	last string // the screen last captured, logged if the test fails
}

// newTmux finds tmux, or skips the test (fails it under CI=true), and
// kills its server when the test ends.
func newTmux(t *testing.T) *tmux {
	t.Helper()
	path, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Unavailable(t, "tmux not found: "+err.Error(), "apt-get install tmux")
	}
	conf := filepath.Join(t.TempDir(), "tmux.conf")
	if err := os.WriteFile(conf, []byte("set-option -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tm := &tmux{t: t, path: path, conf: conf, sock: fmt.Sprintf("fencelock-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the screen last seen:\n%s", tm.last)
		}
		exec.Command(path, "-L", tm.sock, "kill-server").Run()
	})
	return tm
}

// start starts cmd, a fencelock command, in a 140×40 session's pane.
func (tm *tmux) start(cmd *exec.Cmd) {
	tm.t.Helper()
	var env []string
	for _, kv := range cmd.Env[len(os.Environ()):] { // what fencelock added
		env = append(env, shellQuote(kv))
	}
	var args []string
	for _, a := range cmd.Args[1:] {
		args = append(args, shellQuote(a))
	}
	line := fmt.Sprintf("exec env %s %s %s", strings.Join(env, " "), shellQuote(cmd.Path), strings.Join(args, " "))
	tm.run("new-session", "-d", "-s", "s", "-x", "140", "-y", "40", line)
}

// run runs a tmux command on the test's server and returns its output,
// failing the test if it fails.
func (tm *tmux) run(args ...string) string {
	tm.t.Helper()
	cmd := exec.Command(tm.path, append([]string{"-L", tm.sock, "-f", tm.conf}, args...)...)
	cmd.Env = append(os.Environ(), "TMUX=") // not the tmux the test may run in
	out, err := cmd.CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// exitStatus waits for the pane's process to exit and returns its exit
// status and signal, "STATUS/SIGNAL": "0/" for exit status 0.
func (tm *tmux) exitStatus() string {
	tm.t.Helper()
	var status string
	poll.Until(tm.t, "the pane's process to exit", func() bool {
		status = tm.run("display-message", "-p", "-t", "s", "#{pane_dead}/#{pane_dead_status}/#{pane_dead_signal}")
		if status == "1//" {
			// Its pty closed, its status not known: tmux reaps on SIGCHLD,
			// which it misses when the process exits while libutempter's
			// handler is in, as it is while tmux closes the pty
			// (tmux/tmux#311). Another one makes it reap.
			pid, _ := strconv.Atoi(tm.run("display-message", "-p", "#{pid}"))
			syscall.Kill(pid, syscall.SIGCHLD)
		}
		return !strings.HasSuffix(status, "//")
	})
	_, status, _ = strings.Cut(status, "/")
	return status
}

// screen returns what the pane shows.
func (tm *tmux) screen() string {
	tm.last = tm.run("capture-pane", "-p", "-t", "s")
	return tm.last
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
