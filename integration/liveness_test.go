package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// livenessTTL is the first holder's lease in the liveness tests.
const livenessTTL = 2 * time.Second

// TestTransferFrozenHolderLiveness is issue 47's frozen holder, with real
// processes and servers, on PostgreSQL (fence/postgres) and MariaDB
// (fence/sql). T1, a separate process, takes the locks of accounts A and B
// (2 s lease) and, in RunInTxHeld, debits A by 100: its transaction is open, holding both fence rows and A's row. Then
// it stops: frozen with SIGSTOP (resumed later, or never), or cut off from
// etcd with its database connection up. Its lease expires; T2 takes both
// locks and transfers 10 the same way.
//
// T2's transfer must be done within 3 s of getting its locks: its guard
// ends T1's session (connection) after 100 ms. T1's transaction is never acknowledged:
// once it runs again, it fails, saying the server ended its session, and
// the balances are exact (A = 990, B = 1010). The control, T2 without
// preemption, waits for as long as T1 stays frozen (8 s here), and T1
// commits.
func TestTransferFrozenHolderLiveness(t *testing.T) {
	testenv.Long(t, "each case waits out a 2 s lease")
	t.Parallel()
	etcd := etcdlocktest.New(t)
	for _, bank := range livenessBanks(t) {
		t.Run(bank.name, func(t *testing.T) {
			t.Parallel()
			frozenHolderCases(t, etcd, bank)
		})
	}
}

// livenessBank is a database the liveness tests transfer on.
type livenessBank struct {
	name     string
	worker   func(cfg *xferWorkerConfig) // points T1 at the database
	modes    [2]xferMode                 // T2's transfer: preempting, and the control's
	transfer func(ctx context.Context, mode xferMode, m *etcdlock.MultiLock, a, b string) error
	exec     func(t *testing.T, sql string, args ...any)
	balances func(t *testing.T, a, b string) (int64, int64)
	ended    string // what T1's error says once its transaction was ended
}

// livenessBanks returns PostgreSQL (fence/postgres) and MariaDB
// (fence/sql), each with the accounts table and the fence table.
func livenessBanks(t *testing.T) []livenessBank {
	dsn := pgtest.New(t).NewDatabase(t)
	pool := accountsPool(t, dsn)
	mcfg := mysqltest.New(t).NewDatabase(t)
	mdb := mysqltest.Open(t, mcfg)
	if _, err := mdb.ExecContext(t.Context(), "CREATE TABLE accounts (id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if err := sqlfence.CreateSchema(t.Context(), mdb, sqlfence.MySQL); err != nil {
		t.Fatal(err)
	}
	pg := livenessBank{
		worker: func(cfg *xferWorkerConfig) { cfg.DSN = dsn },
		transfer: func(ctx context.Context, mode xferMode, m *etcdlock.MultiLock, a, b string) error {
			return transfer(ctx, pool, mode, m, a, b, 10, func() error { return nil })
		},
		exec: func(t *testing.T, q string, args ...any) {
			if _, err := pool.Exec(t.Context(), q, args...); err != nil {
				t.Fatal(err)
			}
		},
		balances: func(t *testing.T, a, b string) (int64, int64) {
			var gotA, gotB int64
			if err := pool.QueryRow(t.Context(), "SELECT (SELECT balance FROM accounts WHERE id = $1), (SELECT balance FROM accounts WHERE id = $2)", a, b).Scan(&gotA, &gotB); err != nil {
				t.Fatal(err)
			}
			return gotA, gotB
		},
		ended: "ended the transaction's session",
	}
	pgRows := pg
	pg.name, pg.modes = "PostgreSQL", [2]xferMode{xferHeld, xferHeldWaiting}
	pgRows.name, pgRows.modes = "PostgreSQL rows claimed", [2]xferMode{xferRows, xferRowsWaiting}
	return []livenessBank{
		pg,
		pgRows,
		{
			name:   "MariaDB",
			worker: func(cfg *xferWorkerConfig) { cfg.MySQL = mcfg.FormatDSN() },
			modes:  [2]xferMode{xferSQLHeld, xferSQLHeldWaiting},
			transfer: func(ctx context.Context, mode xferMode, m *etcdlock.MultiLock, a, b string) error {
				return transferSQL(ctx, mdb, mode, m, a, b, 10, func() error { return nil })
			},
			exec: func(t *testing.T, q string, args ...any) {
				q = strings.NewReplacer("$1", "?", "$2", "?").Replace(q)
				if _, err := mdb.ExecContext(t.Context(), q, args...); err != nil {
					t.Fatal(err)
				}
			},
			balances: func(t *testing.T, a, b string) (int64, int64) {
				var gotA, gotB int64
				if err := mdb.QueryRowContext(t.Context(), "SELECT (SELECT balance FROM accounts WHERE id = ?), (SELECT balance FROM accounts WHERE id = ?)", a, b).Scan(&gotA, &gotB); err != nil {
					t.Fatal(err)
				}
				return gotA, gotB
			},
			ended: "connection ended before the transaction did",
		},
	}
}

// frozenHolderCases runs TestTransferFrozenHolderLiveness's cases on bank.
func frozenHolderCases(t *testing.T, etcd *etcdlocktest.Server, bank livenessBank) {
	const freezeFor = 8 * time.Second
	tests := []struct {
		name    string
		stop    string // "freeze", "freeze for good", "cut off"
		control bool
	}{
		{"frozen, resumed", "freeze", false},
		{"frozen for good", "freeze for good", false},
		{"cut off from etcd, connection open", "cut off", false},
		{"control: without preemption", "freeze", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := fmt.Sprintf("live-%s-%d-A", bank.name, i), fmt.Sprintf("live-%s-%d-B", bank.name, i)
			bank.exec(t, "INSERT INTO accounts (id, balance) VALUES ($1, 1000), ($2, 1000)", a, b)
			endpoints := etcd.Endpoints()
			var proxy *netproxy.Proxy
			if tt.stop == "cut off" {
				var err error
				proxy, err = netproxy.Start(strings.TrimPrefix(endpoints[0], "http://"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { proxy.Close() })
				endpoints = []string{"http://" + proxy.Addr()}
			}
			cfg := xferWorkerConfig{Etcd: endpoints, From: a, To: b, Mode: bank.modes[0], TTL: livenessTTL}
			bank.worker(&cfg)
			t1 := startWorker(t, xferWorkerEnv, cfg)
			tok1 := ready(t, t1)
			stopped := time.Now()
			switch tt.stop {
			case "cut off":
				proxy.Cut()
			default:
				pause(t, t1)
			}
			if tt.stop == "freeze" {
				// The freeze lasts freezeFor, then T1 may write again.
				timer := time.AfterFunc(freezeFor, func() { _ = t1.Send(childproc.Go); _ = t1.Resume() })
				t.Cleanup(func() { timer.Stop() })
			}

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			locks, stopLocks, err := workerLocks(ctx, etcd.Endpoints())
			if err != nil {
				t.Fatal(err)
			}
			defer stopLocks()
			m, err := locks.LockAll(ctx, []string{a, b}) // once T1's lease has expired
			if err != nil {
				t.Fatalf("T2's LockAll: %v", err)
			}
			defer m.Unlock(context.WithoutCancel(ctx))
			locked := time.Now()
			if m.Lock(a).Token() <= tok1 {
				t.Fatalf("T2's token %d is not above T1's %d", m.Lock(a).Token(), tok1)
			}
			mode := bank.modes[0]
			if tt.control {
				mode = bank.modes[1]
			}
			if err := bank.transfer(ctx, mode, m, a, b); err != nil {
				t.Fatalf("T2's transfer: got %v, want nil", err)
			}
			done := time.Now()
			waited := done.Sub(locked)
			t.Logf("T1 stopped; T2 locked after %v, done %v after that (%v after T1 stopped; lease %v)",
				locked.Sub(stopped).Round(time.Millisecond), waited.Round(time.Millisecond), done.Sub(stopped).Round(time.Millisecond), livenessTTL)

			wantBalances := func(wantA, wantB int64) {
				t.Helper()
				if gotA, gotB := bank.balances(t, a, b); gotA != wantA || gotB != wantB {
					t.Fatalf("balances: got %s = %d, %s = %d, want %d and %d", a, gotA, b, gotB, wantA, wantB)
				}
			}
			if tt.control {
				if waited < 3*time.Second {
					t.Fatalf("control: T2 waited %v after its locks, want the frozen T1's whole freeze (past 3 s)", waited)
				}
				if got := next(t, t1, "RESULT"); got != "ok" {
					t.Fatalf("control: T1's transfer: got %q, want ok (T2 waited for its commit)", got)
				}
				wantBalances(890, 1110)
				return
			}
			if waited > 3*time.Second {
				t.Fatalf("T2 waited %v after getting its locks, want at most 3 s", waited)
			}
			wantBalances(990, 1010)
			switch tt.stop {
			case "freeze for good":
				return // the worker is killed, never resumed, when the test ends
			case "cut off":
				if err := t1.Send(childproc.Go); err != nil {
					t.Fatal(err)
				}
			}
			if got := next(t, t1, "RESULT"); !strings.Contains(got, bank.ended) {
				t.Fatalf("T1's transfer once it ran again: got %q, want an error saying %q", got, bank.ended)
			}
			wantBalances(990, 1010)
		})
	}
}

// TestTransferLiveIdleHolder checks that a live holder is never cut off:
// T1 sits idle in its open transaction for three times its 2 s lease,
// renewing the lease meanwhile, and its transfer then commits.
func TestTransferLiveIdleHolder(t *testing.T) {
	testenv.Long(t, "it idles for 6 s")
	t.Parallel()
	etcd := etcdlocktest.New(t)
	dsn := pgtest.New(t).NewDatabase(t)
	pool := accountsPool(t, dsn)
	if _, err := pool.Exec(t.Context(), "INSERT INTO accounts (id, balance) VALUES ('A', 1000), ('B', 1000)"); err != nil {
		t.Fatal(err)
	}
	t1 := startWorker(t, xferWorkerEnv, xferWorkerConfig{Etcd: etcd.Endpoints(), DSN: dsn, From: "A", To: "B", Mode: xferHeld, TTL: livenessTTL})
	ready(t, t1)
	idle := time.NewTimer(3 * livenessTTL)
	<-idle.C
	if err := t1.Send(childproc.Go); err != nil {
		t.Fatal(err)
	}
	if got := next(t, t1, "RESULT"); got != "ok" {
		t.Fatalf("T1's transfer after idling 3 leases: got %q, want ok", got)
	}
	wantBalances(t, pool, "A", "B", 900, 1100)
}

// wantBalances checks the balances of accounts a and b.
func wantBalances(t *testing.T, pool *pgxpool.Pool, a, b string, wantA, wantB int64) {
	t.Helper()
	var gotA, gotB int64
	if err := pool.QueryRow(t.Context(), "SELECT (SELECT balance FROM accounts WHERE id = $1), (SELECT balance FROM accounts WHERE id = $2)", a, b).Scan(&gotA, &gotB); err != nil {
		t.Fatal(err)
	}
	if gotA != wantA || gotB != wantB {
		t.Fatalf("balances: got %s = %d, %s = %d, want %d and %d", a, gotA, b, gotB, wantA, wantB)
	}
}
