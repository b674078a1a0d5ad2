package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// electLocks returns an etcdlock client with a 1 s lease, like the
// workers', closed when the test ends.
func electLocks(t *testing.T, endpoints []string) *etcdlock.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close(context.Background()); cli.Close() })
	return locks
}

// TestElectionLeaderKilled: the leader, a separate process, is killed with
// SIGKILL (no resignation, no lease revoke); the next candidate leads once
// etcd expires the dead leader's lease: within its TTL after the last
// keepalive etcd received, plus up to 500 ms for etcd's expiry check.
func TestElectionLeaderKilled(t *testing.T) {
	t.Parallel() // its own etcd, database (or bucket) and names; it mostly waits on a lease
	etcd := etcdlocktest.New(t)
	a := startWorker(t, electWorkerEnv, electWorkerConfig{Etcd: etcd.Endpoints(), Election: "killed"})
	tokA, err := strconv.ParseInt(next(t, a, "LEADING"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	b := electLocks(t, etcd.Endpoints())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	leading := make(chan fence.Token, 1)
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, "killed", "b", func(ctx context.Context, term *etcdlock.Term) error {
			leading <- term.Token()
			<-ctx.Done()
			return nil
		})
	}()
	waitQueued(t, b, "killed", 1)

	killed := time.Now()
	a.Kill()
	select {
	case tokB := <-leading:
		took := time.Since(killed)
		const ttl = time.Second
		// The bound: TTL + etcd's 500 ms expiry check, plus a margin for the
		// revoke's commit and the handoff on a loaded machine.
		t.Logf("new leader %v after SIGKILL (TTL %v)", took.Round(time.Millisecond), ttl)
		if took > ttl+500*time.Millisecond+250*time.Millisecond {
			t.Errorf("new leader after %v, want within TTL + 500 ms (+250 ms margin)", took)
		}
		if int64(tokB) <= tokA {
			t.Errorf("new leader's token %d, want > %d", tokB, tokA)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no new leader 10s after the leader was killed")
	}
	<-a.Exited()
	cancel()
	<-done
}

// waitQueued waits until election name has n candidates behind its leader.
func waitQueued(t *testing.T, c *etcdlock.Client, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := c.InspectElection(t.Context(), name)
		if err == nil && len(q.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("election %q: %d waiters after 10s (%v), want %d", name, len(q.Waiters), err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestElectionPausedLeader plays the failure fencing exists for with a
// leader: leader A, a separate process running Client.Run, passes its
// guard's check and is stopped with SIGSTOP past its lease; B is elected
// and writes the job row; A resumes and writes with its term's token.
// Fenced, PostgreSQL refuses A's write; in the control (a plain UPDATE)
// it lands over B's.
func TestElectionPausedLeader(t *testing.T) {
	testenv.Long(t, "a frozen leader, seconds of lease (etcdlock's election tests stay in the fast loop)")
	t.Parallel() // its own etcd, database (or bucket) and names; it mostly waits on a lease
	etcd := etcdlocktest.New(t)
	dsn := pgtest.New(t).NewDatabase(t)
	pool := pgPool(t, dsn)
	tests := []struct {
		mode       pgMode
		wantResult string
		wantHolder string
	}{
		{pgRow, "stale", "B, the new leader"},
		{pgTx, "stale", "B, the new leader"},
		{pgNone, "ok", "A, the paused leader"},
	}
	for i, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			job := fmt.Sprintf("elect-job-%d", i)
			if _, err := pool.Exec(t.Context(), "INSERT INTO jobs (id) VALUES ($1)", job); err != nil {
				t.Fatal(err)
			}
			cfg := electWorkerConfig{Etcd: etcd.Endpoints(), Election: "paused-" + job, DSN: dsn, Job: job, Mode: tt.mode}
			a := startWorker(t, electWorkerEnv, cfg)
			tokA := ready(t, a)
			pause(t, a)

			b := electLocks(t, etcd.Endpoints())
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			term, err := b.Campaign(ctx, cfg.Election, "b")
			if err != nil {
				t.Fatalf("B's Campaign: got %v, want nil", err)
			}
			defer term.Resign(context.WithoutCancel(ctx))
			if term.Token() <= tokA {
				t.Fatalf("B's token %d is not above A's %d", term.Token(), tokA)
			}
			g, err := fence.NewGuard(term)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
				return pgWrite(ctx, pool, tt.mode, job, tok, "B, the new leader")
			}); err != nil {
				t.Fatalf("B's write: got %v, want nil", err)
			}

			resumeToWrite(t, a)
			if got := next(t, a, "RESULT"); got != tt.wantResult {
				t.Fatalf("A's late write: got %q, want %q", got, tt.wantResult)
			}
			var holder string
			if err := pool.QueryRow(ctx, "SELECT holder FROM jobs WHERE id = $1", job).Scan(&holder); err != nil || holder != tt.wantHolder {
				t.Fatalf("job row: got holder %q (%v), want %q", holder, err, tt.wantHolder)
			}
		})
	}
}
