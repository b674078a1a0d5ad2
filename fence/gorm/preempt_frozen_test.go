package gormfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// frozenChildEnv makes this test binary a holder that freezes inside
// Update (see frozenChild).
const frozenChildEnv = "GORMFENCE_FROZEN_CHILD"

// frozenConfig is what a frozen holder is given: its database and the
// Update it runs.
type frozenConfig struct {
	Dialect string // "mysql" or "postgres"
	DSN     string
	ID      string
	Token   fence.Token
}

func init() {
	js := os.Getenv(frozenChildEnv)
	if js == "" {
		return
	}
	var cfg frozenConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	if err := frozenChild(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// frozenChild runs Update of account cfg.ID with cfg.Token, debiting 100:
// inside fn, its row claimed, it reports INSIDE and waits for the go-ahead
// (the parent stops it with SIGSTOP meanwhile), then reports Update's
// result (RESULT ok, or RESULT and the error, after "unknown" when it
// matches fence.ErrUnknownOutcome, "terminated" when it matches
// sqlfence.ErrTerminated, "failed" otherwise).
func frozenChild(cfg frozenConfig) error {
	d := mysql.Open(cfg.DSN)
	if cfg.Dialect == "postgres" {
		d = postgres.Open(cfg.DSN)
	}
	db, err := gorm.Open(d, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return err
	}
	if err := db.Use(gormfence.Plugin{}); err != nil {
		return err
	}
	ctx := context.Background()
	acct := Account{ID: cfg.ID}
	err = gormfence.Update(ctx, db, cfg.Token, &acct, func(*gorm.DB) error {
		acct.Balance -= 100
		if err := childproc.Report(os.Stdout, "INSIDE", ""); err != nil {
			return err
		}
		return childproc.AwaitGo(os.Stdin)
	})
	result := "ok"
	switch {
	case errors.Is(err, fence.ErrUnknownOutcome):
		result = "unknown " + err.Error()
	case errors.Is(err, sqlfence.ErrTerminated):
		result = "terminated " + err.Error()
	case err != nil:
		result = "failed " + err.Error()
	}
	return childproc.Report(os.Stdout, "RESULT", result)
}

// preemptServer is a server preemption covers, opened twice: by DSN in
// the frozen child, and as a *gorm.DB here.
type preemptServer struct {
	name    string
	dialect string
	dsn     func(t *testing.T) string
	open    func(dsn string) gorm.Dialector
}

var preemptServers = []preemptServer{
	{"MariaDB", "mysql", func(t *testing.T) string { return mysqltest.New(t).NewDatabase(t).FormatDSN() }, mysql.Open},
	{"PostgreSQL", "postgres", func(t *testing.T) string { return pgtest.New(t).NewDatabase(t) }, postgres.Open},
}

// eachPreempting runs fn as a parallel subtest per preemptServer.
func eachPreempting(t *testing.T, fn func(t *testing.T, srv preemptServer)) {
	t.Helper()
	for _, srv := range preemptServers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			fn(t, srv)
		})
	}
}

// frozen is a child process stopped (SIGSTOP) inside Update, its row
// claimed and its transaction open.
type frozen struct {
	p       *childproc.Proc
	stopped time.Time // when every thread of it was seen stopped
}

// freezeInUpdate starts a child that runs Update of account id with token,
// and stops it inside fn.
func freezeInUpdate(t *testing.T, srv preemptServer, dsn, id string, token fence.Token) *frozen {
	t.Helper()
	cmd, err := childproc.Reexec(frozenChildEnv, frozenConfig{Dialect: srv.dialect, DSN: dsn, ID: id, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if _, err := p.Next(30*time.Second, "INSIDE"); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	return &frozen{p: p, stopped: time.Now()}
}

// resume lets the child go on and returns its Update's result.
func (z *frozen) resume(t *testing.T) string {
	t.Helper()
	if err := z.p.Send(childproc.Go); err != nil {
		t.Fatal(err)
	}
	if err := z.p.Resume(); err != nil {
		t.Fatal(err)
	}
	res, err := z.p.Next(30*time.Second, "RESULT")
	if err != nil {
		t.Fatal(err)
	}
	if err := z.p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	return res
}

// waiter is the next holder's Update, debiting 10, running in the
// background.
type waiter struct {
	done  chan struct{}
	err   error     // set before done closes
	ended time.Time // set before done closes
}

func startWaiter(ctx context.Context, db *gorm.DB, id string, token fence.Token) *waiter {
	w := &waiter{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		acct := Account{ID: id}
		w.err = gormfence.Update(ctx, db, token, &acct, func(*gorm.DB) error {
			acct.Balance -= 10
			return nil
		})
		w.ended = time.Now()
	}()
	return w
}

// The lease of the frozen holder in TestPreemptFrozenInUpdate, and the
// bound on the next holder's wait after it: the brief's "once a lease has
// expired, the next holder goes on within TTL + 1 s".
const (
	frozenLease = time.Second
	preemptGoal = time.Second
)

// TestPreemptFrozenInUpdate is a holder frozen with a real SIGSTOP inside
// Update, token 1, its row claimed. Its lease (1 s) expires; the next
// holder, token 2, runs Update on the same row, and must be done within
// 1 s of that: its claim ends the frozen holder's transaction. Once
// continued, the frozen holder gets an error and its debit does not land.
// The control, with Plugin{NoPreemption: true}, is still blocked at the
// bound; it goes on once the frozen holder is continued and commits.
func TestPreemptFrozenInUpdate(t *testing.T) {
	testenv.Long(t, "it stops a child process inside Update and waits out its lease")
	t.Parallel()
	tests := []struct {
		name    string
		plugin  gormfence.Plugin
		preempt bool
	}{
		{"preempted", gormfence.Plugin{}, true},
		{"control: NoPreemption waits", gormfence.Plugin{NoPreemption: true}, false},
	}
	eachPreempting(t, func(t *testing.T, srv preemptServer) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dsn := srv.dsn(t)
				db := openGorm(t, srv.open(dsn), tt.plugin)
				mustCreate(t, db, "p", 1000)
				z := freezeInUpdate(t, srv, dsn, "p", 1)
				expiry := z.stopped.Add(frozenLease)
				<-time.After(time.Until(expiry)) // the frozen holder's lease runs out
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				w := startWaiter(ctx, db, "p", 2)
				bound := time.NewTimer(time.Until(expiry.Add(preemptGoal)))
				defer bound.Stop()
				select {
				case <-w.done:
				case <-bound.C:
				}
				if tt.preempt {
					preempted(t, db, z, w, expiry)
				} else {
					stillBlocked(t, db, z, w, expiry)
				}
			})
		}
	})
}

// preempted checks the next holder w went on within the bound after the
// frozen holder z's lease expired, and that z's debit did not land.
func preempted(t *testing.T, db *gorm.DB, z *frozen, w *waiter, expiry time.Time) {
	t.Helper()
	select {
	case <-w.done:
	default:
		res := z.resume(t)
		<-w.done
		t.Fatalf("next holder: still blocked %v after the frozen holder's lease expired, want done within %v (frozen holder, continued: %s; next holder then: %v)",
			preemptGoal, preemptGoal, res, w.err)
	}
	if w.err != nil {
		t.Fatalf("next holder: got %v, want nil", w.err)
	}
	t.Logf("next holder done %v after the frozen holder's lease expired (bound %v)", w.ended.Sub(expiry).Round(time.Millisecond), preemptGoal)
	wantAccount(t, db, "p", 990, 2)
	res := z.resume(t)
	if !strings.HasPrefix(res, "terminated ") {
		t.Fatalf("frozen holder, continued: got %q, want sqlfence.ErrTerminated (its transaction was ended), not an unknown outcome", res)
	}
	t.Logf("frozen holder, continued: %s", res)
	wantAccount(t, db, "p", 990, 2)
}

// stillBlocked is the control: the next holder w, which ends nothing, is
// still blocked at the bound; continued, the frozen holder z commits, and
// w goes on after it.
func stillBlocked(t *testing.T, db *gorm.DB, z *frozen, w *waiter, expiry time.Time) {
	t.Helper()
	select {
	case <-w.done:
		t.Fatalf("control: the next holder was done %v after the frozen holder's lease expired (error %v), want it still blocked at %v",
			w.ended.Sub(expiry).Round(time.Millisecond), w.err, preemptGoal)
	default:
	}
	if res := z.resume(t); res != "ok" {
		t.Fatalf("control: frozen holder, continued: got %q, want ok (never ended)", res)
	}
	<-w.done
	if w.err != nil {
		t.Fatalf("control: next holder: got %v, want nil once the frozen holder committed", w.err)
	}
	t.Logf("control: next holder done %v after the frozen holder's lease expired, once it was continued", w.ended.Sub(expiry).Round(time.Millisecond))
	wantAccount(t, db, "p", 890, 2)
}

// TestPreemptLeavesNewerHolder: a holder with a newer token (5), frozen
// with a real SIGSTOP inside Update, is not ended by an older waiter (3):
// the waiter, which looks every 250 ms after 100 ms, is still blocked
// after 1.5 s; once the holder is continued it commits, and the waiter's
// claim is then stale.
func TestPreemptLeavesNewerHolder(t *testing.T) {
	testenv.Long(t, "it stops a child process inside Update and waits on it")
	t.Parallel()
	eachPreempting(t, func(t *testing.T, srv preemptServer) {
		dsn := srv.dsn(t)
		db := openGorm(t, srv.open(dsn))
		mustCreate(t, db, "n", 1000)
		z := freezeInUpdate(t, srv, dsn, "n", 5)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		w := startWaiter(ctx, db, "n", 3)
		select {
		case <-w.done:
			t.Fatalf("older waiter: got %v while the newer holder was frozen, want it blocked", w.err)
		case <-time.After(1500 * time.Millisecond):
		}
		if res := z.resume(t); res != "ok" {
			t.Fatalf("newer holder, continued: got %q, want ok (left alone)", res)
		}
		<-w.done
		fencewant.Stale(t, w.err, 3, 5)
		wantAccount(t, db, "n", 900, 5)
	})
}
