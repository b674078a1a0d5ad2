// Command fencedemo plays the failure every lock service has — a holder that
// is paused past its lease and writes after a newer holder — against
// embedded etcd, with real processes and real timing, twice: once with the
// resource enforcing fencing tokens, once without.
//
//	go run ./cmd/fencedemo
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/embedetcd"
)

// The demo re-runs its own executable as worker A; these variables tell it so.
const (
	envWorker   = "FENCEDEMO_WORKER"
	envEtcd     = "FENCEDEMO_ETCD"
	envResource = "FENCEDEMO_RESOURCE"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: fencedemo\n\nPlays a paused lock holder's late write against embedded etcd, with and without fencing.")
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fencedemo:", err)
		os.Exit(1)
	}
}

// run is the demo, or worker A when started as one.
func run() error {
	if name := os.Getenv(envWorker); name != "" {
		return worker(os.Getenv(envEtcd), os.Getenv(envResource), name)
	}
	return demo(os.Stdout)
}

// demo plays the story twice, fenced and not, telling it on out.
func demo(out io.Writer) error {
	dir, err := os.MkdirTemp("", "fencedemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fmt.Fprintln(out, "starting embedded etcd (nothing to install)...")
	cluster, err := embedetcd.StartServer(ctx, dir)
	if err != nil {
		return err
	}
	defer cluster.Close()
	ep := cluster.Endpoints()[0]

	var landed [2]bool
	for i, fenced := range []bool{true, false} {
		if landed[i], err = play(ctx, out, ep, fenced, i); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	switch {
	case !landed[0] && landed[1]:
		fmt.Fprintln(out, "Same lock, same pause. Only the resource's token check kept A's stale write out.")
		return nil
	default:
		return fmt.Errorf("unexpected outcome: stale write landed with fencing %v, without %v", landed[0], landed[1])
	}
}

// play runs the story once and reports whether A's stale write landed.
func play(ctx context.Context, out io.Writer, ep string, fenced bool, round int) (bool, error) {
	r, err := startResource(fenced)
	if err != nil {
		return false, err
	}
	defer r.srv.Close()
	mode := "ON: the resource refuses tokens older than the newest it has seen"
	if !fenced {
		mode = "OFF: the resource keeps whatever it is sent last"
	}
	fmt.Fprintf(out, "\n=== Run %d — fencing %s\n", round+1, mode)
	t := newTimeline(out)
	name := fmt.Sprintf("ledger-%d", round)

	a, err := startWorker(ep, r.baseURL, name)
	if err != nil {
		return false, err
	}
	defer a.stop()
	line, err := a.expect("locked")
	if err != nil {
		return false, err
	}
	f := strings.Fields(line)
	t.say("A takes lock %q: token %s, lease TTL %s", name, f[1], f[2])
	if _, err := a.expect("checked"); err != nil {
		return false, err
	}
	t.say("A checks that it still holds the lock: yes. It is about to write...")
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return false, err
	}
	if err := waitStopped(a.cmd.Process.Pid); err != nil {
		return false, err
	}
	t.say("A is frozen (SIGSTOP: think GC pause, VM migration). Its keepalives stop.")
	fmt.Fprintln(a.stdin, "go") // A reads this once it runs again

	tokB, err := clientB(ctx, ep, name, r.baseURL, t)
	if err != nil {
		return false, err
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return false, err
	}
	t.say("A wakes up (SIGCONT), still inside its critical section, and writes with token %s", f[1])
	res, err := a.expect("result")
	if err != nil {
		return false, err
	}
	result := strings.TrimPrefix(res, "result ")
	rec, err := httpStore{r.baseURL}.Get(ctx, "balance")
	if err != nil {
		return false, err
	}
	landed := strings.HasPrefix(string(rec.Value), "A:")
	if result == "ok" {
		t.say("the resource ACCEPTS A's stale write")
	} else {
		t.say("the resource REFUSES A's write: %s", result)
	}
	t.say("final value: %q (B holds token %d)", rec.Value, tokB)
	if landed {
		fmt.Fprintln(out, "  => LOST UPDATE: B's write was overwritten by a holder whose lease had expired.")
	} else {
		fmt.Fprintln(out, "  => B's write stands. A's error matches fence.ErrStale; A must not retry it.")
	}
	return landed, nil
}

// clientB takes the lock (waiting for A's lease to run out) and writes.
func clientB(ctx context.Context, ep, name, url string, t *timeline) (fence.Token, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		return 0, err
	}
	defer locks.Close(context.Background())
	t.say("B asks for the lock and waits...")
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	lock, err := locks.Lock(lctx, name)
	if err != nil {
		return 0, err
	}
	defer lock.Unlock(context.Background())
	t.say("A's lease expired in etcd; B gets the lock: token %d", lock.Token())
	g, err := fence.NewGuard(lock)
	if err != nil {
		return 0, err
	}
	if err := g.Put(ctx, httpStore{url}, "balance", []byte("B: balance=100")); err != nil {
		return 0, err
	}
	t.say("B writes balance=100 with token %d: accepted", lock.Token())
	return lock.Token(), nil
}

// proc is worker A as a child process.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startWorker(ep, url, name string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envWorker+"="+name, envEtcd+"="+ep, envResource+"="+url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}, nil
}

// expect reads lines until one starts with word.
func (p *proc) expect(word string) (string, error) {
	for p.out.Scan() {
		if l := p.out.Text(); strings.HasPrefix(l, word) {
			return l, nil
		}
	}
	return "", errors.Join(fmt.Errorf("worker A exited before saying %q", word), p.out.Err())
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// waitStopped polls until every thread of pid is stopped, so that nothing A
// does can come after the freeze and before B's turn. Without /proc (macOS)
// it can only give the signal a moment.
func waitStopped(pid int) error {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", pid)); err != nil {
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if stopped(pid) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("worker A (pid %d) not stopped 5s after SIGSTOP", pid)
}

func stopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			return false
		}
		// The state follows the parenthesised command name: "pid (comm) T ...".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

type timeline struct {
	out   io.Writer
	start time.Time
}

func newTimeline(out io.Writer) *timeline { return &timeline{out: out, start: time.Now()} }

func (t *timeline) say(format string, args ...any) {
	fmt.Fprintf(t.out, "  %6.3fs  %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}
