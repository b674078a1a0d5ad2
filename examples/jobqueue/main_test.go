package main

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestMain lets the test binary act as a worker process when the lesson
// starts one.
func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		if err := run(os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestLesson drains the table three ways against a real PostgreSQL and
// checks the story's claims from the tables: with no claim jobs run twice
// (the control); with SKIP LOCKED or a lock per job none does and none is
// missed, and the killed worker's job is taken by another — at once with
// SKIP LOCKED (well within a lease), after the lease with the lock. The
// handoff times are logged, not held to tight bounds.
func TestLesson(t *testing.T) {
	var out bytes.Buffer
	rs, err := lesson(&out)
	if errors.Is(err, pgtest.ErrUnavailable) {
		testenv.NoServer(t, err, pgtest.ErrUnavailable, "install PostgreSQL's server binaries (bash .ci/setup.sh) or set "+pgtest.EnvDSN)
	}
	if err != nil {
		t.Fatalf("lesson: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if len(rs) != len(queues) {
		t.Fatalf("got %d rounds, want %d", len(rs), len(queues))
	}
	if naive := rs[0]; naive.twice == 0 {
		t.Errorf("no claim (the control): got no job run twice in %d runs, want some", naive.runs)
	}
	for _, r := range rs[1:] {
		t.Logf("%s: the killed worker's job %d taken by worker %d %v after the kill", r.queue, r.held, r.takenBy, r.handoff)
		if r.twice != 0 || r.missing != 0 || r.runs != jobs {
			t.Errorf("%s: got %d runs, %d jobs twice, %d missing; want %d runs, none twice or missing", r.queue, r.runs, r.twice, r.missing, jobs)
		}
		if r.held == 0 || r.takenBy == 0 || r.takenBy == victimID {
			t.Errorf("%s: the victim's job %d was taken over by worker %d, want another worker than %d", r.queue, r.held, r.takenBy, victimID)
		}
		if r.victimRuns != 0 {
			t.Errorf("%s: got %d runs of job %d by the killed worker, want 0", r.queue, r.victimRuns, r.held)
		}
	}
	if h := rs[1].handoff; h >= lockTTL/2 {
		t.Errorf("skiplocked: the killed worker's job was taken %v after the kill, want well within a lease (%v): at once", h, lockTTL/2)
	}
	if h := rs[2].handoff; h < lockTTL/2 {
		t.Errorf("etcdlock: the killed worker's job was taken %v after the kill, want its lease waited out (at least %v)", h, lockTTL/2)
	}
}
