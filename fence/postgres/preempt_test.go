package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/pgtag"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// frozen is a fenced transaction whose holder stops inside it, with its
// transaction open and its connection up, as a process stopped with
// SIGSTOP or a suspended VM leaves it: RunInTxAll over claims, fn having
// written A, waiting on resume before it writes B.
type frozen struct {
	inside chan struct{} // closed once A is written
	resume chan struct{} // close to let it go on
	done   chan error    // its RunInTx's result
}

func freeze(t *testing.T, pool *pgxpool.Pool, claims []fence.Claim) *frozen {
	t.Helper()
	f := &frozen{inside: make(chan struct{}), resume: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		ctx := context.WithoutCancel(t.Context())
		f.done <- postgres.RunInTxAll(ctx, pool, claims, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 100 WHERE id = 'A'"); err != nil {
				return err
			}
			close(f.inside)
			<-f.resume
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + 100 WHERE id = 'B'")
			return err
		})
	}()
	select {
	case <-f.inside:
	case err := <-f.done:
		t.Fatalf("the first holder's transaction: got %v before its pause, want it open", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first holder's transaction did not reach its pause in 10 s")
	}
	t.Cleanup(f.let)
	return f
}

// let resumes the frozen holder (again: a no-op) and returns its result.
func (f *frozen) let() {
	select {
	case <-f.resume:
	default:
		close(f.resume)
	}
}

func (f *frozen) result(t *testing.T) error {
	t.Helper()
	f.let()
	select {
	case err := <-f.done:
		f.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the first holder's transaction did not end in 10 s after it resumed")
		return nil
	}
}

// next runs the next holder's transfer of 10 from A to B, bounded by
// limit, and returns its error and how long it took.
func next(t *testing.T, pool *pgxpool.Pool, claims []fence.Claim, limit time.Duration, run func(ctx context.Context, fn func(pgx.Tx) error) error) (time.Duration, error) {
	t.Helper()
	// start before the deadline is set, so that a run that waits until it
	// took at least limit, however long the gap between the two.
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	err := run(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + (CASE id WHEN 'A' THEN -10 ELSE 10 END) WHERE id IN ('A', 'B')")
		return err
	})
	return time.Since(start), err
}

func balances(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var a, b int64
	if err := pool.QueryRow(t.Context(), "SELECT (SELECT balance FROM accounts WHERE id = 'A'), (SELECT balance FROM accounts WHERE id = 'B')").Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("A=%d B=%d", a, b)
}

func claims(pairs ...any) []fence.Claim {
	var cs []fence.Claim
	for i := 0; i < len(pairs); i += 2 {
		cs = append(cs, fence.Claim{Resource: pairs[i].(string), Token: fence.Token(pairs[i+1].(int))})
	}
	return cs
}

// TestPreemptFrozenHolder is the frozen holder of issue 47: it holds both
// accounts' fences and A's row in an open transaction, its lease long gone.
// The next holder's transfer, with newer tokens, ends the frozen
// transaction's session after waiting 100 ms and goes on; the frozen
// holder's next statement fails with ErrTerminated and nothing of it lands.
// The control (WithoutPreemption) waits until its context ends, and says
// so.
func TestPreemptFrozenHolder(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	old := claims("A", 2, "B", 3)
	newer := claims("A", 4, "B", 5)

	t.Run("control: WithoutPreemption waits", func(t *testing.T) {
		f := freeze(t, pool, old)
		took, err := next(t, pool, newer, time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
			return postgres.RunInTxAll(ctx, pool, newer, fn, postgres.WithoutPreemption())
		})
		if !errors.Is(err, context.DeadlineExceeded) || took < time.Second {
			t.Fatalf("next holder without preemption: got %v after %v, want the deadline after 1 s", err, took)
		}
		if !strings.Contains(err.Error(), "the context ended") || strings.Contains(err.Error(), "the caller's transaction") {
			t.Errorf("error: got %q, want it to name the context, not the caller's transaction", err)
		}
		if err := f.result(t); err != nil {
			t.Fatalf("the first holder, never ended: got %v, want its commit", err)
		}
		if got, want := balances(t, pool), "A=900 B=1100"; got != want {
			t.Fatalf("balances: got %s, want %s", got, want)
		}
	})

	t.Run("preempted", func(t *testing.T) {
		f := freeze(t, pool, claims("A", 6, "B", 7))
		newer := claims("A", 8, "B", 9)
		took, err := next(t, pool, newer, 10*time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
			return postgres.RunInTxAll(ctx, pool, newer, fn)
		})
		if err != nil {
			t.Fatalf("next holder: got %v after %v, want nil", err, took)
		}
		if took > 2*time.Second {
			t.Errorf("next holder waited %v, want well under 2 s (100 ms before it looks)", took)
		}
		t.Logf("the next holder's transfer took %v", took)
		err = f.result(t)
		if !errors.Is(err, postgres.ErrTerminated) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("the frozen holder once resumed: got %v, want ErrTerminated (and no unknown outcome)", err)
		}
		if got, want := balances(t, pool), "A=890 B=1110"; got != want {
			t.Fatalf("balances: got %s, want %s (the first transfer kept, the frozen one not, the next one kept)", got, want)
		}
	})
}

// TestPreemptLeavesAlone checks the blockers a waiting guard must not end:
// the same holder's own transaction (a token in common), a newer holder's
// (the waiter is the stale one), a transaction that is not fenced, and,
// for a waiter of mixed tokens, a blocker newer on the resource they
// share. Each waiter's context ends after 700 ms; the blocker then commits
// as usual. The cases that end the blocker read its token for the shared
// resource from its tag, whatever its other tokens (a straddle).
func TestPreemptLeavesAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		blocker []fence.Claim // nil: a plain transaction locking A's fence row
		waiter  []fence.Claim
		holder  *claimer // nil: RunInTxAll over waiter
		ended   bool
	}{
		{"same token", claims("A", 10), claims("A", 10), nil, false},
		{"a token in common", claims("A", 10, "B", 11), claims("A", 12, "B", 11), nil, false},
		{"newer blocker", claims("A", 20), claims("A", 15), nil, false},
		{"not fenced", nil, claims("A", 30), nil, false},
		// The blocker's tag names B with 33: older than the waiter's 40
		// there, whatever the waiter's other tokens or its holder say.
		{"mixed tokens, no holder", claims("B", 33), claims("A", 10, "B", 40), nil, true},
		{"mixed tokens, holder lost", claims("B", 33), claims("A", 10, "B", 40), &claimer{lost: true}, true},
		{"mixed tokens, holder valid", claims("B", 33), claims("A", 10, "B", 40), &claimer{}, true},
		// A straddle: the blocker holds A older than the waiter (5 < 10)
		// and B newer than the waiter's A (50 > 10), as LockAll's queued
		// tokens do.
		{"straddling blocker", claims("A", 5, "B", 50), claims("A", 10, "C", 60), nil, true},
		{"blocker newer on the shared resource", claims("A", 15, "B", 3), claims("A", 10, "C", 60), nil, false},
		{"older than all", claims("A", 3, "B", 4), claims("A", 10, "B", 40), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := newBank(t)
			var f *frozen
			if tt.blocker != nil {
				f = freeze(t, pool, tt.blocker)
			} else {
				f = freezePlain(t, pool, "A")
			}
			took, err := next(t, pool, tt.waiter, 700*time.Millisecond, func(ctx context.Context, fn func(pgx.Tx) error) error {
				if tt.holder != nil {
					tt.holder.claims = tt.waiter
					return postgres.RunInTxHeld(ctx, pool, tt.holder, fn, postgres.WithPreemptAfter(50*time.Millisecond))
				}
				return postgres.RunInTxAll(ctx, pool, tt.waiter, fn, postgres.WithPreemptAfter(50*time.Millisecond))
			})
			blockerErr := f.result(t)
			if tt.ended {
				if err != nil || !errors.Is(blockerErr, postgres.ErrTerminated) {
					t.Fatalf("got waiter %v (after %v), blocker %v; want the blocker ended with ErrTerminated and the waiter through", err, took, blockerErr)
				}
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "blocked by session") {
				t.Errorf("waiter: got %v, want the deadline, naming the session that blocked it", err)
			}
			if blockerErr != nil {
				t.Fatalf("blocker: got %v, want its commit (left alone)", blockerErr)
			}
		})
	}
}

// freezePlain holds the fence row of resource in a transaction that is not
// fenced (SELECT ... FOR UPDATE), stopped as freeze's is.
func freezePlain(t *testing.T, pool *pgxpool.Pool, resource string) *frozen {
	t.Helper()
	if err := postgres.RunInTx(t.Context(), pool, resource, 1, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	f := &frozen{inside: make(chan struct{}), resume: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		ctx := context.WithoutCancel(t.Context())
		f.done <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT 1 FROM "+postgres.DefaultFenceTable+" WHERE resource = $1 FOR UPDATE", resource); err != nil {
				return err
			}
			close(f.inside)
			<-f.resume
			return nil
		})
	}()
	<-f.inside
	t.Cleanup(f.let)
	return f
}

// claimer is a holder of several claims that knows whether it still holds
// them, as an *etcdlock.MultiLock does.
type claimer struct {
	claims []fence.Claim
	lost   bool
}

func (c *claimer) Claims() []fence.Claim { return c.claims }
func (c *claimer) Done() <-chan struct{} {
	ch := make(chan struct{})
	if c.lost {
		close(ch)
	}
	return ch
}
func (c *claimer) ValidUntil() time.Time { return time.Now().Add(time.Minute) }

// TestPreemptTag checks that a fenced transaction shows its tokens as its
// session's application_name while it runs, and only then.
func TestPreemptTag(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	appName := func(db postgres.DB) string {
		var s string
		if err := db.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := appName(conn)
	tests := []struct {
		name string
		run  func(fn func(pgx.Tx) error) error
		want string
	}{
		{"RunInTx", func(fn func(pgx.Tx) error) error { return postgres.RunInTx(t.Context(), conn, "A", 7, fn) },
			"fencelock:t=7-7;" + pgtag.Entry("A", 7)},
		{"RunInTxAll", func(fn func(pgx.Tx) error) error {
			return postgres.RunInTxAll(t.Context(), conn, claims("B", 9, "A", 8), fn)
		}, "fencelock:t=8-9;" + pgtag.Entry("A", 8) + ";" + pgtag.Entry("B", 9)},
	}
	for _, tt := range tests {
		var inside string
		if err := tt.run(func(tx pgx.Tx) error { inside = appName(tx); return nil }); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if inside != tt.want {
			t.Errorf("%s: application_name inside: got %q, want %q", tt.name, inside, tt.want)
		}
		if after := appName(conn); after != before {
			t.Errorf("%s: application_name after: got %q, want %q as before", tt.name, after, before)
		}
	}
}

// TestPreemptPrivilege runs the frozen holder and the next one as two
// roles. Without pg_signal_backend the next holder may not end the frozen
// one's session: it waits until its context ends, and its error says why.
// Granted pg_signal_backend, it ends it.
func TestPreemptPrivilege(t *testing.T) {
	testenv.Long(t, "it creates roles and waits out preemptions")
	t.Parallel()
	admin, _ := newBank(t)
	for _, role := range []string{"holder_one", "holder_two"} {
		mustExec(t, admin, "CREATE ROLE "+role+" LOGIN")
		mustExec(t, admin, "GRANT ALL ON accounts, "+postgres.DefaultFenceTable+" TO "+role)
	}
	t.Cleanup(func() {
		for _, role := range []string{"holder_one", "holder_two"} {
			_, _ = admin.Exec(context.WithoutCancel(t.Context()), "DROP OWNED BY "+role)
			_, _ = admin.Exec(context.WithoutCancel(t.Context()), "DROP ROLE "+role)
		}
	})
	one, two := poolAs(t, admin, "holder_one"), poolAs(t, admin, "holder_two")

	f := freeze(t, one, claims("A", 2, "B", 3))
	newer := claims("A", 4, "B", 5)
	run := func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTxAll(ctx, two, newer, fn)
	}
	_, err := next(t, two, newer, time.Second, run)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pg_signal_backend") {
		t.Fatalf("next holder without the privilege: got %v, want the deadline, naming pg_signal_backend", err)
	}
	mustExec(t, admin, "GRANT pg_signal_backend TO holder_two")
	if _, err := next(t, two, newer, 10*time.Second, run); err != nil {
		t.Fatalf("next holder with pg_signal_backend: got %v, want nil", err)
	}
	if err := f.result(t); !errors.Is(err, postgres.ErrTerminated) {
		t.Fatalf("frozen holder: got %v, want ErrTerminated", err)
	}
}

// poolAs returns a pool on admin's database as role.
func poolAs(t *testing.T, admin *pgxpool.Pool, role string) *pgxpool.Pool {
	t.Helper()
	cfg := admin.Config().Copy()
	cfg.ConnConfig.User = role
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestPreemptTableClaims is the frozen holder with rows claimed through a
// Table in transactions of the caller's own: T1 claims A (GetForUpdate),
// debits it and freezes; the next holder's claim of A, in its own
// transaction or alone, ends T1 after 100 ms, and T1's next write fails
// with ErrTerminated. With WithoutPreemption the next claim waits. A
// transaction whose claims carry a newer token than the waiter's, and an
// older one, is left alone: its tag covers both.
func TestPreemptTableClaims(t *testing.T) {
	testenv.Long(t, "it waits out several preemptions of claimed rows")
	t.Parallel()
	pool, tbl := newBank(t)
	waiting, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"), postgres.WithoutPreemption())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		claims []fence.Claim // T1's, in order; it writes A
		token  fence.Token   // the next holder's token for A
		table  *postgres.Table
		inTx   bool
		ended  bool
	}{
		{"in a transaction", claims("A", 2), 3, tbl, true, true},
		{"alone", claims("A", 4), 5, tbl, false, true},
		{"control: WithoutPreemption", claims("A", 6), 7, waiting, true, false},
		{"blocker newer on A, older elsewhere", claims("A", 20, "B", 8), 12, tbl, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := freezeClaims(t, pool, tbl, tt.claims)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			claim := func(db postgres.DB) error {
				var bal int64
				return tt.table.GetForUpdate(ctx, db, "A", tt.token, []string{"balance"}, &bal)
			}
			if tt.inTx {
				err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return claim(tx) })
			} else {
				err = claim(pool)
			}
			got := z.result(t)
			if tt.ended {
				if err != nil || !errors.Is(got, postgres.ErrTerminated) {
					t.Fatalf("got next claim %v, T1 %v; want the claim through and T1 ended with ErrTerminated", err, got)
				}
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) || got != nil {
				t.Fatalf("got next claim %v, T1 %v; want the claim's deadline and T1's commit", err, got)
			}
		})
	}
}

// freezeClaims is freeze with T1's rows claimed through tbl in a
// transaction of its own, in the order given; it then debits A by 100.
func freezeClaims(t *testing.T, pool *pgxpool.Pool, tbl *postgres.Table, cs []fence.Claim) *frozen {
	t.Helper()
	f := &frozen{inside: make(chan struct{}), resume: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		ctx := context.WithoutCancel(t.Context())
		f.done <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var tokA fence.Token
			for _, c := range cs {
				var bal int64
				if err := tbl.GetForUpdate(ctx, tx, c.Resource, c.Token, []string{"balance"}, &bal); err != nil {
					return err
				}
				if c.Resource == "A" {
					tokA = c.Token
				}
			}
			close(f.inside)
			<-f.resume
			return tbl.Update(ctx, tx, "A", tokA, postgres.Add("balance", -100))
		})
	}()
	select {
	case <-f.inside:
	case err := <-f.done:
		t.Fatalf("T1: got %v before its pause, want it open", err)
	}
	t.Cleanup(f.let)
	return f
}

// TestPreemptTagWidens checks that a transaction's tag covers every token
// its claims carried, whatever their order.
func TestPreemptTagWidens(t *testing.T) {
	t.Parallel()
	pool, tbl := newBank(t)
	var name string
	err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		if err := tbl.Update(t.Context(), tx, "A", 7, postgres.Add("balance", 1)); err != nil {
			return err
		}
		var bal int64
		if err := tbl.GetForUpdate(t.Context(), tx, "B", 3, []string{"balance"}, &bal); err != nil {
			return err
		}
		if err := tbl.Upsert(t.Context(), tx, "C", 5, postgres.Set("balance", 1)); err != nil {
			return err
		}
		return tx.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&name)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "fencelock:t=3-7;" + pgtag.Entry("accounts/A", 7) + ";" + pgtag.Entry("accounts/B", 3) + ";" + pgtag.Entry("accounts/C", 5)
	if name != want {
		t.Fatalf("application_name after claims of 7, 3 and 5: got %q, want %q", name, want)
	}
}

// TestPreemptExec checks that a one-statement fenced write (Exec) waiting
// for a frozen older holder's transaction ends it too.
func TestPreemptExec(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	f := freeze(t, pool, claims("A", 2))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := postgres.Exec(ctx, pool, "A", 3, "UPDATE accounts SET balance = 0 WHERE id = 'A'"); err != nil {
		t.Fatalf("Exec: got %v, want nil", err)
	}
	if err := f.result(t); !errors.Is(err, postgres.ErrTerminated) {
		t.Fatalf("frozen holder: got %v, want ErrTerminated", err)
	}
}

// TestPreemptTagOverflows checks that a transaction whose claims no longer
// fit in application_name keeps its range, and says its entries gave way.
func TestPreemptTagOverflows(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	var cs []fence.Claim
	for i := range 6 {
		cs = append(cs, fence.Claim{Resource: fmt.Sprintf("r%d", i), Token: fence.Token(1_000_000_000 + i)})
	}
	var name string
	err := postgres.RunInTxAll(t.Context(), pool, cs, func(tx pgx.Tx) error {
		return tx.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "fencelock:t=1000000000-1000000005;+"; name != want {
		t.Fatalf("application_name after 6 claims: got %q, want %q", name, want)
	}
}
