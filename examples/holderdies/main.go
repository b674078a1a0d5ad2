// Command holderdies takes the same lock on Redis (SET NX PX, renewed, and
// released with a compare-and-delete script) and on etcd (etcdlock), kills
// the holder (SIGKILL) and, separately, stops it gracefully (SIGTERM), and
// measures how long the next holder waits on each. It starts both servers
// itself: redis-server from the machine, etcd embedded.
//
// What it shows, against the folklore: on SIGKILL etcd waits out the lease
// too, just as Redis waits out the TTL; on a graceful stop both hand the
// lock over at once (etcdlock revokes its lease). The difference is the
// token: etcd's grows with each holder, so a resource can refuse the older
// one; Redis' random value cannot be ordered.
//
//	go -C examples run ./holderdies
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/examples/internal/redisproc"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// envHolder, set to a holderConfig as JSON, makes this executable, re-run
// by the lesson, a lock holder.
const envHolder = "HOLDERDIES_HOLDER"

// ttl is the lease of both locks; both holders renew it every third.
const ttl = 2 * time.Second

// reportTimeout bounds the wait for each of a holder process's reports.
const reportTimeout = 30 * time.Second

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "holderdies:", err)
		os.Exit(1)
	}
}

// run is the lesson, or a holder when started as one.
func run(out io.Writer) error {
	if js := os.Getenv(envHolder); js != "" {
		return holder(js, os.Stdout)
	}
	_, err := lesson(out)
	return err
}

// servers are the two lock services and the lesson's clients of them.
type servers struct {
	out   io.Writer
	redis *redisproc.Server
	etcd  string // endpoint
	locks *etcdlock.Client
}

// lesson starts both servers, plays the four handoffs and tells them.
func lesson(out io.Writer) ([]handoff, error) {
	dir, err := os.MkdirTemp("", "holderdies-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Fprintln(out, "starting redis-server on a free loopback port, and embedded etcd...")
	rs, err := redisproc.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	es, err := embedetcd.StartServer(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer es.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: es.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(ttl))
	if err != nil {
		return nil, err
	}
	defer locks.Close(context.Background())
	s := &servers{out: out, redis: rs, etcd: es.Endpoints()[0], locks: locks}
	hs, err := s.handoffs(ctx)
	if err != nil {
		return hs, err
	}
	summarize(out, hs)
	return hs, nil
}
