// Command jobqueue drains a jobs table on a real PostgreSQL with ten worker
// processes, three ways: with no claim at all (the control: jobs run
// twice), with SELECT … FOR UPDATE SKIP LOCKED (the row lock is the claim;
// a worker SIGKILLed mid-transaction loses its job to another at once, no
// TTL involved), and with an etcdlock lock per job (the work outside the
// database; a killed worker's job waits out its lease). Every claim is
// checked from the tables afterwards. It starts PostgreSQL (from the
// machine's binaries) and etcd (embedded) itself.
//
//	go -C examples run ./jobqueue
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// envWorker, set to a workerConfig as JSON, makes this executable, re-run
// by the lesson, a worker.
const envWorker = "JOBQUEUE_WORKER"

const (
	jobs    = 100                   // in the table
	workers = 10                    // processes draining it
	jobTime = 10 * time.Millisecond // each job's work
	lockTTL = 2 * time.Second       // of the lock-per-job queue's leases
	timeout = 30 * time.Second      // bounds each wait for the workers
	schema  = `CREATE TABLE jobs (id int PRIMARY KEY, done_at timestamptz, done_by int, token bigint);
		CREATE TABLE runs (job_id int NOT NULL, worker int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jobqueue:", err)
		os.Exit(1)
	}
}

// run is the lesson, or a worker when started as one.
func run(out io.Writer) error {
	if js := os.Getenv(envWorker); js != "" {
		return worker(js, os.Stdin, os.Stdout)
	}
	_, err := lesson(out)
	return err
}

// lessonEnv is what every round uses.
type lessonEnv struct {
	out  io.Writer
	dsn  string
	pool *pgxpool.Pool
	etcd string // endpoint
}

// lesson starts the servers and plays the three queues.
func lesson(out io.Writer) ([]roundResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fmt.Fprintln(out, "starting PostgreSQL (a throwaway cluster) and embedded etcd...")
	srv, err := pgtest.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	_, dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jobqueue-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	es, err := embedetcd.StartServer(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer es.Close()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return nil, err
	}
	l := &lessonEnv{out: out, dsn: dsn, pool: pool, etcd: es.Endpoints()[0]}
	var rs []roundResult
	for _, q := range queues {
		r, err := l.round(ctx, q)
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	fmt.Fprint(out, fits)
	return rs, nil
}

// fits is the lesson's end: when each queue is the one to use.
const fits = `
=== When each fits
  SKIP LOCKED: the queue and the job's effects live in one database, and a job fits in one
    transaction. The claim is the row lock: a crashed worker's transaction aborts and its job is
    free at once, with no lock service and no TTL to guess. It costs a connection and an open
    transaction per running job, so keep jobs short.
  A lock per job: the work happens outside the database (an API call, a file, an object store),
    where no transaction can take it back. The lock keeps two workers off one job, its token goes
    with each write so the resource can refuse a late one (go run ./cmd/fencedemo), and a crashed
    worker's job waits for its lease to run out.
  Neither makes an outside effect happen exactly once: a worker killed after its effect and
  before its commit leaves the job to be done again, so make the effect idempotent.
`
