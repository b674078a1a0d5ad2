package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// claimList is a fence.Claimer, as an etcdlock *MultiLock is one.
type claimList []fence.Claim

func (c *claimList) Claims() []fence.Claim { return *c }

// newBank returns a fresh database of srv with the fence table and the
// accounts A and B, 1000 each.
func newBank(t *testing.T, srv server, opts ...sqlfence.Option) (*sql.DB, *sqlfence.Fences) {
	t.Helper()
	db, f := newLedger(t, srv, opts...)
	mustExec(t, db, accountsDDL(srv.d))
	mustExec(t, db, "INSERT INTO accounts (id, balance) VALUES ('A', 1000), ('B', 1000)")
	return db, f
}

// move moves amount from account from to account to in tx, the debit
// first, as a transfer in that direction would.
func move(ctx context.Context, srv server, tx *sql.Tx, from, to string, amount int) error {
	q := fmt.Sprintf("UPDATE accounts SET balance = balance + %s WHERE id = %s", ph(srv.d, 1), ph(srv.d, 2))
	if _, err := tx.ExecContext(ctx, q, -amount, from); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, q, amount, to)
	return err
}

func wantFence(t *testing.T, db *sql.DB, f *sqlfence.Fences, resource string, want fence.Token) {
	t.Helper()
	if got, err := f.Current(t.Context(), db, resource); err != nil || got != want {
		t.Fatalf("fence of %q: got %d, %v, want %d", resource, got, err, want)
	}
}

// TestRunInTxAll: every fence is raised before fn; one stale claim refuses
// the whole transaction before fn; fn's error rolls every fence back; a
// claim repeated with its token is taken once; the Claimer form is the
// same.
func TestRunInTxAll(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		ctx := t.Context()
		claims := []fence.Claim{{Resource: "B", Token: 5}, {Resource: "A", Token: 4}, {Resource: "B", Token: 5}}
		err := f.RunInTxAll(ctx, db, claims, func(tx *sql.Tx) error { return move(ctx, srv, tx, "A", "B", 100) })
		if err != nil {
			t.Fatalf("RunInTxAll: got %v, want nil", err)
		}
		if claims[0].Resource != "B" {
			t.Fatal("RunInTxAll reordered its caller's claims")
		}
		wantFence(t, db, f, "A", 4)
		wantFence(t, db, f, "B", 5)
		wantAccount(t, srv, db, "A", 900, 0)

		called := false
		err = f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "A", Token: 9}, {Resource: "B", Token: 3}},
			func(*sql.Tx) error { called = true; return nil })
		fencewant.Stale(t, err, 3, 5)
		if called {
			t.Error("RunInTxAll with a stale claim called fn, want it refused first")
		}
		wantFence(t, db, f, "A", 4) // A's raise to 9 rolled back with the transaction

		boom := errors.New("boom")
		err = f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "A", Token: 6}, {Resource: "C", Token: 6}}, func(tx *sql.Tx) error {
			if err := move(ctx, srv, tx, "A", "B", 1); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("RunInTxAll whose fn fails: got %v, want its error", err)
		}
		wantFence(t, db, f, "A", 4)
		if _, err := f.Current(ctx, db, "C"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("fence of C after a rolled-back first claim: got %v, want fence.ErrNotFound", err)
		}
		wantAccount(t, srv, db, "A", 900, 0)

		ml := claimList{{Resource: "A", Token: 7}, {Resource: "B", Token: 8}}
		if err := f.RunInTxHeld(ctx, db, &ml, func(tx *sql.Tx) error { return move(ctx, srv, tx, "B", "A", 50) }); err != nil {
			t.Fatalf("RunInTxHeld: got %v, want nil", err)
		}
		wantFence(t, db, f, "A", 7)
		wantFence(t, db, f, "B", 8)
		wantAccount(t, srv, db, "A", 950, 0)
	})
}

// TestRunInTxAllTransfers: transfers in both directions between A and B
// at once, each debiting first (so that, unserialised, opposite ones take
// the rows' locks in opposite orders). RunInTxAll raises the fences in
// name order, so the transfers queue on A's fence row instead of
// deadlocking, and every one succeeds: the total is kept and each is
// counted once. (MariaDB may deadlock on the first claims of the two new
// fence rows, InnoDB's gap locks; that happens before fn, and the
// transaction is begun again, as retry.go does for every fenced
// transaction: no caller sees it.)
func TestRunInTxAllTransfers(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		ctx := t.Context()
		const workers, rounds = 4, 8
		errs := make(chan error, workers*rounds)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range workers {
			from, to := "A", "B"
			if w%2 == 1 {
				from, to = to, from
			}
			wg.Go(func() {
				<-start
				for r := range rounds {
					claims := []fence.Claim{{Resource: from, Token: 1}, {Resource: to, Token: 1}}
					errs <- f.RunInTxAll(ctx, db, claims, func(tx *sql.Tx) error { return move(ctx, srv, tx, from, to, 10+w+r) })
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("transfer: got %v, want nil", err)
			}
		}
		// Workers 0 and 2 move 10+w+r from A, 1 and 3 to A: A gets
		// sum over r of (11+r)+(13+r) - (10+r)-(12+r) = 2 per round.
		wantAccount(t, srv, db, "A", 1000+2*rounds, 0)
		wantAccount(t, srv, db, "B", 1000-2*rounds, 0)
	})
}

// TestRunInTxAllOrder: two transfers in opposite directions, each holding
// its first resource when it asks for the second. Raising the fences in
// the order given (the control, with Advance in the caller's
// transactions) deadlocks, and the server rolls one back. RunInTxAll
// raises them in name order: the second transfer waits on A's fence while
// the first runs its function, then runs its own; both succeed.
func TestRunInTxAllOrder(t *testing.T) {
	for _, srv := range []server{servers[0], servers[3]} {
		t.Run(srv.name, func(t *testing.T) {
			db, f := newBank(t, srv)
			ctx := t.Context()
			for _, r := range []string{"A", "B"} {
				if err := f.Advance(ctx, db, r, 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := givenOrderDeadlocks(t, db, f); !errors.Is(err, sqlfence.ErrRetryable) {
				t.Fatalf("control, fences raised in the order given: got %v, want a deadlock (ErrRetryable)", err)
			}

			inFn, release := make(chan struct{}), make(chan struct{})
			first := make(chan error, 1)
			go func() {
				first <- f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "A", Token: 2}, {Resource: "B", Token: 2}}, func(tx *sql.Tx) error {
					close(inFn)
					<-release
					return move(ctx, srv, tx, "A", "B", 100)
				})
			}()
			<-inFn
			second := make(chan error, 1)
			go func() {
				second <- f.RunInTxAll(ctx, db, []fence.Claim{{Resource: "B", Token: 2}, {Resource: "A", Token: 2}}, func(tx *sql.Tx) error {
					return move(ctx, srv, tx, "B", "A", 30)
				})
			}()
			waitRowLockWait(t, srv, db)
			close(release)
			if err := <-first; err != nil {
				t.Fatalf("first transfer: got %v, want nil", err)
			}
			if err := <-second; err != nil {
				t.Fatalf("second transfer: got %v, want nil", err)
			}
			wantAccount(t, srv, db, "A", 930, 0)
			wantAccount(t, srv, db, "B", 1070, 0)
		})
	}
}

// givenOrderDeadlocks raises A then B in one transaction and B then A in
// another, each holding its first when it asks for its second, and
// returns the error of the one the server rolled back (nil if neither
// was). Both transactions are rolled back when it returns.
func givenOrderDeadlocks(t *testing.T, db *sql.DB, f *sqlfence.Fences) error {
	t.Helper()
	ctx := t.Context()
	x, y := begin(t, db), begin(t, db)
	defer func() { _, _ = x.Rollback(), y.Rollback() }()
	if err := f.Advance(ctx, x, "A", 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Advance(ctx, y, "B", 2); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	second := func(tx *sql.Tx, resource string) {
		err := f.Advance(ctx, tx, resource, 2)
		if err != nil {
			_ = tx.Rollback() // PostgreSQL's victim holds its locks until then
		}
		errs <- err
	}
	go second(x, "B")
	go second(y, "A")
	return errors.Join(<-errs, <-errs)
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}
