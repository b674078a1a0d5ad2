// Command fencedemo plays the failure every lock service has — a holder that
// is paused past its lease and writes after a newer holder — against
// embedded etcd, with real processes and real timing, twice: once with the
// resource enforcing fencing tokens, once without.
//
//	go run ./cmd/fencedemo
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// envWorker, set to a workerConfig as JSON, makes the demo's executable,
// re-run by the demo, worker A.
const envWorker = "FENCEDEMO_WORKER"

// reportTimeout bounds the wait for each of worker A's reports.
const reportTimeout = 30 * time.Second

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
	if js := os.Getenv(envWorker); js != "" {
		return worker(js, os.Stdin, os.Stdout)
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
	defer a.Stop(5 * time.Second)
	locked, err := a.Next(reportTimeout, "LOCKED")
	if err != nil {
		return false, err
	}
	f := strings.Fields(locked)
	if len(f) != 2 {
		return false, fmt.Errorf("worker A reported LOCKED %q, want a token and a TTL", locked)
	}
	t.say("A takes lock %q: token %s, lease TTL %s", name, f[0], f[1])
	if _, err := a.Next(reportTimeout, "READY"); err != nil {
		return false, err
	}
	t.say("A checks that it still holds the lock: yes. It is about to write...")
	if err := a.Pause(); err != nil { // returns once A is stopped: nothing it does comes after
		return false, err
	}
	t.say("A is frozen (SIGSTOP: think GC pause, VM migration). Its keepalives stop.")
	if err := a.Send(childproc.Go); err != nil { // A reads this once it runs again
		return false, err
	}

	tokB, err := clientB(ctx, ep, name, r.baseURL, t)
	if err != nil {
		return false, err
	}
	if err := a.Resume(); err != nil {
		return false, err
	}
	t.say("A wakes up (SIGCONT), still inside its critical section, and writes with token %s", f[0])
	result, err := a.Next(reportTimeout, "RESULT")
	if err != nil {
		return false, err
	}
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

// startWorker starts worker A: this executable again, as a child process
// (childproc's worker protocol).
func startWorker(ep, url, name string) (*childproc.Proc, error) {
	cmd, err := childproc.Reexec(envWorker, workerConfig{Etcd: ep, Resource: url, Name: name})
	if err != nil {
		return nil, err
	}
	return childproc.Start(cmd, nil)
}

type timeline struct {
	out   io.Writer
	start time.Time
}

func newTimeline(out io.Writer) *timeline { return &timeline{out: out, start: time.Now()} }

func (t *timeline) say(format string, args ...any) {
	fmt.Fprintf(t.out, "  %6.3fs  %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}
