package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
)

// frozenTx is a fenced transaction whose holder stops inside it, its
// transaction open and its connection up, as a process stopped with
// SIGSTOP leaves it: fn has debited A, and waits on resume before it
// credits B.
type frozenTx struct {
	inside chan struct{}
	resume chan struct{}
	done   chan error
}

func freezeTx(t *testing.T, srv server, db *sql.DB, f *sqlfence.Fences, cs []fence.Claim, plain bool) *frozenTx {
	t.Helper()
	z := &frozenTx{inside: make(chan struct{}), resume: make(chan struct{}), done: make(chan error, 1)}
	body := func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 100 WHERE id = 'A'"); err != nil {
			return err
		}
		close(z.inside)
		<-z.resume
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + 100 WHERE id = 'B'")
		return err
	}
	go func() {
		ctx := context.WithoutCancel(t.Context())
		if plain {
			z.done <- plainTx(ctx, srv, db, cs[0].Resource, body)
			return
		}
		z.done <- f.RunInTxAll(ctx, db, cs, func(tx *sql.Tx) error { return body(ctx, tx) })
	}()
	select {
	case <-z.inside:
	case err := <-z.done:
		t.Fatalf("the first holder's transaction: got %v before its pause, want it open", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first holder's transaction did not reach its pause in 10 s")
	}
	t.Cleanup(z.let)
	return z
}

// plainTx holds resource's fence row in a transaction that is not fenced
// (SELECT ... FOR UPDATE), then runs body.
func plainTx(ctx context.Context, srv server, db *sql.DB, resource string, body func(context.Context, *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT token FROM "+sqlfence.DefaultFenceTable+" WHERE resource = "+ph(srv.d, 1)+" FOR UPDATE", resource); err != nil {
		return err
	}
	if err := body(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (z *frozenTx) let() {
	select {
	case <-z.resume:
	default:
		close(z.resume)
	}
}

func (z *frozenTx) result(t *testing.T) error {
	t.Helper()
	z.let()
	select {
	case err := <-z.done:
		z.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the first holder's transaction did not end in 10 s after it resumed")
		return nil
	}
}

// nextTransfer runs the next holder's transfer of 10 from A to B, bounded
// by limit, and returns its error and how long it took.
func nextTransfer(t *testing.T, db *sql.DB, f *sqlfence.Fences, cs []fence.Claim, limit time.Duration, opts ...sqlfence.TxOption) (time.Duration, error) {
	t.Helper()
	// start before the deadline is set, so that a run that waits until it
	// took at least limit, however long the gap between the two.
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	err := f.RunInTxAll(ctx, db, cs, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + (CASE id WHEN 'A' THEN -10 ELSE 10 END) WHERE id IN ('A', 'B')")
		return err
	}, opts...)
	return time.Since(start), err
}

func bankBalances(t *testing.T, db *sql.DB) string {
	t.Helper()
	var a, b int64
	if err := db.QueryRowContext(t.Context(), "SELECT (SELECT balance FROM accounts WHERE id = 'A'), (SELECT balance FROM accounts WHERE id = 'B')").Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("A=%d B=%d", a, b)
}

func claimsOf(pairs ...any) []fence.Claim {
	var cs []fence.Claim
	for i := 0; i < len(pairs); i += 2 {
		cs = append(cs, fence.Claim{Resource: pairs[i].(string), Token: fence.Token(pairs[i+1].(int))})
	}
	return cs
}

// mariaDB is servers[0].
func mariaDB() server { return servers[0] }

// preempting are the servers preemption covers: MariaDB and PostgreSQL.
func preempting(t *testing.T, fn func(t *testing.T, srv server)) {
	t.Helper()
	for _, srv := range []server{servers[0], servers[3]} {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			fn(t, srv)
		})
	}
}

// TestPreemptFrozenHolder is issue 47's frozen holder on MariaDB: it holds
// both accounts' fences and A's row in an open transaction. The next
// holder's transfer, with newer tokens, ends the frozen transaction's
// connection after waiting 100 ms and goes on; the frozen holder's next
// statement fails with ErrTerminated and nothing of it lands. The control
// (WithoutPreemption) waits until its context ends, and says so.
func TestPreemptFrozenHolder(t *testing.T) {
	t.Parallel()
	preempting(t, frozenHolder)
}

func frozenHolder(t *testing.T, srv server) {
	db, f := newBank(t, srv)

	t.Run("control: WithoutPreemption waits", func(t *testing.T) {
		z := freezeTx(t, srv, db, f, claimsOf("A", 2, "B", 3), false)
		took, err := nextTransfer(t, db, f, claimsOf("A", 4, "B", 5), time.Second, sqlfence.WithoutPreemption())
		if !errors.Is(err, context.DeadlineExceeded) || took < time.Second {
			t.Fatalf("next holder without preemption: got %v after %v, want the deadline after 1 s", err, took)
		}
		if err := z.result(t); err != nil {
			t.Fatalf("the first holder, never ended: got %v, want its commit", err)
		}
		if got, want := bankBalances(t, db), "A=900 B=1100"; got != want {
			t.Fatalf("balances: got %s, want %s", got, want)
		}
	})

	t.Run("preempted", func(t *testing.T) {
		z := freezeTx(t, srv, db, f, claimsOf("A", 6, "B", 7), false)
		took, err := nextTransfer(t, db, f, claimsOf("A", 8, "B", 9), 10*time.Second)
		if err != nil {
			t.Fatalf("next holder: got %v after %v, want nil", err, took)
		}
		if took > 2*time.Second {
			t.Errorf("next holder waited %v, want well under 2 s (100 ms before it looks)", took)
		}
		t.Logf("the next holder's transfer took %v", took)
		err = z.result(t)
		if !errors.Is(err, sqlfence.ErrTerminated) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("the frozen holder once resumed: got %v, want ErrTerminated, a definite failure", err)
		}
		t.Logf("the frozen holder, resumed: %v", err)
		if got, want := bankBalances(t, db), "A=890 B=1110"; got != want {
			t.Fatalf("balances: got %s, want %s (the first transfer kept, the frozen one not, the next one kept)", got, want)
		}
	})
}

// TestPreemptLeavesAlone checks the blockers a waiting fence statement must
// not end: the same holder's own transaction (the same token), a newer
// holder's, and a transaction that is not fenced. Each waiter's context
// ends after 700 ms, its error naming what blocked it; the blocker then
// commits as usual.
func TestPreemptLeavesAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		blocker []fence.Claim
		plain   bool
		waiter  []fence.Claim
	}{
		{"same token", claimsOf("A", 10), false, claimsOf("A", 10)},
		{"newer blocker", claimsOf("A", 20), false, claimsOf("A", 15)},
		{"not fenced", claimsOf("A", 1), true, claimsOf("A", 30)},
	}
	preempting(t, func(t *testing.T, srv server) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				leftAlone(t, srv, tt.blocker, tt.plain, tt.waiter)
			})
		}
	})
}

func leftAlone(t *testing.T, srv server, blocker []fence.Claim, plain bool, waiter []fence.Claim) {
	{
		{
			db, f := newBank(t, srv)
			if err := f.Advance(t.Context(), db, "A", 1); err != nil {
				t.Fatal(err)
			}
			z := freezeTx(t, srv, db, f, blocker, plain)
			_, err := nextTransfer(t, db, f, waiter, 700*time.Millisecond, sqlfence.WithPreemptAfter(50*time.Millisecond))
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "blocked by") {
				t.Errorf("waiter: got %v, want the deadline, naming what blocked it", err)
			}
			if err := z.result(t); err != nil {
				t.Fatalf("blocker: got %v, want its commit (left alone)", err)
			}
		}
	}
}

// TestPreemptNewResource checks a frozen first claim on MariaDB: the frozen
// holder created the fence's row, uncommitted; the next holder ends it
// too. (On PostgreSQL the row is invisible to the look, which finds the
// holder by the row's xmax: not covered.)
func TestPreemptNewResource(t *testing.T) {
	t.Parallel()
	db, f := newBank(t, mariaDB())
	z := freezeTx(t, mariaDB(), db, f, claimsOf("fresh", 3), false)
	if _, err := nextTransfer(t, db, f, claimsOf("fresh", 4), 10*time.Second); err != nil {
		t.Fatalf("next holder: got %v, want nil", err)
	}
	if err := z.result(t); !errors.Is(err, sqlfence.ErrTerminated) {
		t.Fatalf("the frozen holder once resumed: got %v, want ErrTerminated", err)
	}
	wantFence(t, db, f, "fresh", 4)
}

// TestPreemptQualifiedTable runs the frozen holder on a fence table named
// with its database.
func TestPreemptQualifiedTable(t *testing.T) {
	t.Parallel()
	cfg := mysqltest.New(t).NewDatabase(t)
	db := mysqltest.Open(t, cfg)
	f, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{cfg.DBName, "my fences"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, accountsDDL(sqlfence.MySQL))
	mustExec(t, db, "INSERT INTO accounts (id, balance) VALUES ('A', 1000), ('B', 1000)")
	z := freezeTx(t, mariaDB(), db, f, claimsOf("A", 3), false)
	if _, err := nextTransfer(t, db, f, claimsOf("A", 4), 10*time.Second); err != nil {
		t.Fatalf("next holder: got %v, want nil", err)
	}
	if err := z.result(t); !errors.Is(err, sqlfence.ErrTerminated) {
		t.Fatalf("the frozen holder once resumed: got %v, want ErrTerminated", err)
	}
}
