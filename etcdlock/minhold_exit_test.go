package etcdlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// minHoldChildEnv makes this test binary a job process of
// TestMinHoldOutlivesProcess (see minHoldChild).
const minHoldChildEnv = "ETCDLOCK_MINHOLD_CHILD"

type minHoldChildConfig struct {
	Endpoints []string
	Prefix    string
	Hold      time.Duration
}

func init() {
	js := os.Getenv(minHoldChildEnv)
	if js == "" {
		return
	}
	var cfg minHoldChildConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	if err := minHoldChild(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// minHoldChild is a job process: it takes lock "job" with the minimum
// hold, reports the wall time it got it (ACQUIRED), unlocks, and exits
// without closing its Client, so that its session's lease is left to
// expire, as a process that ends without cleaning up leaves it.
func minHoldChild(cfg minHoldChildConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	c, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second), etcdlock.WithPrefix(cfg.Prefix))
	if err != nil {
		return err
	}
	l, err := c.TryLock(ctx, "job", etcdlock.WithMinHold(cfg.Hold))
	if err != nil {
		return err
	}
	if err := childproc.Report(os.Stdout, "ACQUIRED", strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// A job process that unlocks and exits, leaving its session's lease to
// expire, leaves the key until the minimum hold has passed; in the
// control, without the option, the key goes with the session's lease,
// before then.
func TestMinHoldOutlivesProcess(t *testing.T) {
	testenv.Long(t, "it waits out a minimum hold after a process exits")
	t.Parallel()
	const hold = 4 * time.Second // well past the session's lease (1 s TTL)
	tests := []struct {
		name     string
		hold     time.Duration
		wantKept bool
	}{
		{"min hold", hold, true},
		{"control: none", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := etcdClient(t)
			cmd, err := childproc.Reexec(minHoldChildEnv, minHoldChildConfig{Endpoints: endpoints(), Prefix: prefix(t), Hold: tt.hold})
			if err != nil {
				t.Fatal(err)
			}
			p, err := childproc.Start(cmd, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Kill)
			at, err := p.Next(30*time.Second, "ACQUIRED")
			if err != nil {
				t.Fatalf("child: %v (%s)", err, p.Output())
			}
			if err := p.Wait(30 * time.Second); err != nil {
				t.Fatalf("child exit: %v (%s)", err, p.Output())
			}
			ns, _ := strconv.ParseInt(at, 10, 64)
			acquired := time.Unix(0, ns)
			waitQueueEmpty(t, cli, "job")
			gone := time.Now()
			if kept := !gone.Before(acquired.Add(hold)); kept != tt.wantKept {
				t.Fatalf("key gone %v after the child's acquisition: got kept for the hold of %v %v, want %v",
					gone.Sub(acquired).Round(time.Millisecond), hold, kept, tt.wantKept)
			}
		})
	}
}
