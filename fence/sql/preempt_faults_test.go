package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestPreemptBlockerWaitingElsewhere: on MariaDB the look leaves out every
// transaction in LOCK WAIT (holdersSQL: b.trx_state <> 'LOCK WAIT'), also
// one that holds the waiter's row and waits on another row. H (A=3, B=4)
// raised A and waits on B, which F (B=5, newer on B than H) holds frozen:
// H's own look rightly leaves F alone. The next holder W (A=6, B=7) waits
// on A, held by H: H is older on A, but in LOCK WAIT, so W's look finds no
// holder at all and W waits as long as H's context allows (here 20 s, with
// context.Background() forever), behind a holder frozen long past its
// lease. Wanted (as on PostgreSQL): W ends H, then F, and goes on.
func TestPreemptBlockerWaitingElsewhere(t *testing.T) {
	t.Parallel()
	preempting(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		for _, r := range []string{"A", "B"} { // not first claims
			if err := f.Advance(t.Context(), db, r, 1); err != nil {
				t.Fatal(err)
			}
		}
		z := freezeTx(t, srv, db, f, claimsOf("B", 5), false)
		hctx, hcancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer hcancel()
		hDone := make(chan error, 1)
		go func() {
			hDone <- f.RunInTxAll(hctx, db, claimsOf("A", 3, "B", 4), func(*sql.Tx) error { return nil })
		}()
		time.Sleep(500 * time.Millisecond) // H has raised A and waits on B
		took, err := nextTransfer(t, db, f, claimsOf("A", 6, "B", 7), 5*time.Second)
		if err != nil {
			t.Errorf("next holder (A=6, B=7) behind H (A=3, in LOCK WAIT on B) and frozen F (B=5): got %v after %v, want it through", err, took)
		}
		hcancel()
		hErr := <-hDone
		fErr := z.result(t)
		t.Logf("H: %v; F: %v; took %v", hErr, fErr, took)
		if hErr == nil {
			t.Errorf("H (stale on B): got nil, want an error")
		}
		if !errors.Is(fErr, sqlfence.ErrTerminated) && err == nil {
			t.Errorf("F: got %v, want ErrTerminated", fErr)
		}
	})
}

// TestPreemptOddKeys (holds): the frozen holder on MariaDB with keys whose
// lock_data is unusual: long, NUL and non-UTF-8 bytes, a backtick.
func TestPreemptOddKeys(t *testing.T) {
	t.Parallel()
	long := make([]byte, 767)
	for i := range long {
		long[i] = byte('a' + i%26)
	}
	for _, key := range []string{string(long), "a\x00b", "\xff\xfe", "x`y", "A'B"} {
		t.Run("", func(t *testing.T) {
			srv := mariaDB()
			db, f := newBank(t, srv)
			if err := f.Advance(t.Context(), db, key, 1); err != nil {
				t.Fatal(err)
			}
			z := freezeTx(t, srv, db, f, claimsOf(key, 3), false)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			if err := f.RunInTx(ctx, db, key, 4, func(*sql.Tx) error { return nil }); err != nil {
				t.Errorf("key %q: got %v, want through", key[:min(len(key), 10)], err)
			}
			_ = z.result(t)
		})
	}
}

// TestPreemptOddTableNames (holds?): the frozen holder on MariaDB with a
// fence table whose name has a backtick, a dot, non-ASCII letters.
func TestPreemptOddTableNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"fen`ces", "a.b", "zäune", "Fences"} {
		t.Run("", func(t *testing.T) {
			srv := mariaDB()
			db := srv.open(t)
			f, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{name})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.CreateTable(t.Context(), db); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, accountsDDL(sqlfence.MySQL))
			mustExec(t, db, "INSERT INTO accounts (id, balance) VALUES ('A', 1000), ('B', 1000)")
			if err := f.Advance(t.Context(), db, "A", 1); err != nil {
				t.Fatal(err)
			}
			z := freezeTxOn(t, db, f, "A", 3)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			if err := f.RunInTx(ctx, db, "A", 4, func(*sql.Tx) error { return nil }); err != nil {
				t.Errorf("table %q: got %v, want through", name, err)
			}
			close(z)
		})
	}
}

// freezeTxOn holds a fenced transaction on resource open until the
// returned channel is closed.
func freezeTxOn(t *testing.T, db *sql.DB, f *sqlfence.Fences, resource string, tok int) chan struct{} {
	inside, resume := make(chan struct{}), make(chan struct{})
	go func() {
		_ = f.RunInTxAll(context.WithoutCancel(t.Context()), db, claimsOf(resource, tok), func(*sql.Tx) error {
			close(inside)
			<-resume
			return nil
		})
	}()
	<-inside
	return resume
}

// panicTracer panics in the fence's UPDATE after delay, past preemptAfter.
type panicTracer struct{ delay time.Duration }

func (p panicTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "UPDATE ") && strings.Contains(d.SQL, sqlfence.DefaultFenceTable) {
		time.Sleep(p.delay)
		panic("tracer")
	}
	return ctx
}

func (panicTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPreemptWatchOutlivesPanicSQL: guard (fence/sql) cancels the watch
// only when advance returns; a panic in the statement (a driver's, a pgx
// tracer's) leaves the watch goroutine polling every 250 ms, with a
// connection of the pool taken, until ctx ends (never, for
// context.Background()); begin also leaves the transaction open (no
// Rollback on a panic), its connection held. fence/postgres fixed the
// same (TestPreemptWatchOutlivesPanic).
func TestPreemptWatchOutlivesPanicSQL(t *testing.T) {
	testenv.Long(t, "it waits out a preemption after a panic")
	// Not parallel: it counts the watches of the whole process.
	cfg, err := pgx.ParseConfig(pgtest.New(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = panicTracer{delay: 400 * time.Millisecond}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	f, err := sqlfence.NewFences(sqlfence.PostgreSQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context()) // stands for a ctx that never ends
	defer cancel()
	func() {
		defer func() { _ = recover() }()
		_ = f.RunInTx(ctx, db, "A", 2, func(*sql.Tx) error { return nil })
	}()
	time.Sleep(700 * time.Millisecond)
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if n := strings.Count(stacks, "fence/sql.preemption.run"); n != 0 {
		t.Errorf("after RunInTx panicked and returned: %d watch goroutine(s) still running, want none", n)
	}
	if s := db.Stats(); s.InUse != 0 {
		t.Errorf("after RunInTx panicked and returned: %d connection(s) in use (the open transaction, the watch's), want none", s.InUse)
	}
}

// slowLook delays the watch's second look (its pg_stat_activity query) by
// delay, as a loaded server or machine would.
type slowLook struct {
	delay time.Duration
	n     *atomic.Int32
}

func (s slowLook) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_stat_activity") && s.n.Add(1) == 2 {
		time.Sleep(s.delay)
	}
	return ctx
}

func (slowLook) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPreemptLookCutOffLosesWhy: run keeps only the last look's result, so
// a look that the waiter's deadline cuts off replaces what the earlier
// looks found ("blocked by session N, a fenced transaction of tokens 20 to
// 20") with the context's own error: the waiter's error no longer names
// what blocked it. This is how TestPreemptLeavesAlone/PostgreSQL fails on a
// loaded machine ("looking at what blocks it: timeout: context deadline
// exceeded"); here the second look is made slow on purpose.
func TestPreemptLookCutOffLosesWhy(t *testing.T) {
	t.Parallel()
	cfg, err := pgx.ParseConfig(pgtest.New(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = slowLook{delay: 500 * time.Millisecond, n: new(atomic.Int32)}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	f, err := sqlfence.NewFences(sqlfence.PostgreSQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	if err := f.Advance(t.Context(), db, "A", 1); err != nil {
		t.Fatal(err)
	}
	resume := freezeTxOn(t, db, f, "A", 20) // a newer holder: left alone
	defer close(resume)
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	err = f.RunInTx(ctx, db, "A", 15, func(*sql.Tx) error { return nil }, sqlfence.WithPreemptAfter(50*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "blocked by") {
		t.Errorf("waiter: got %v, want the deadline, naming what blocked it (the first look found it)", err)
	}
}

// TestPreemptEndedBeforeCommit: the frozen holder's function has done its
// writes and returned; the holder freezes before its COMMIT (a GC pause)
// and is ended by the next holder. Once it resumes, its COMMIT fails. Its
// error must not be a success, and should match ErrTerminated (a newer
// holder ended it; ErrTerminated's doc: "When the COMMIT was in flight the
// error also matches fence.ErrUnknownOutcome").
func TestPreemptEndedBeforeCommit(t *testing.T) {
	t.Parallel()
	preempting(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		if err := f.Advance(t.Context(), db, "A", 1); err != nil {
			t.Fatal(err)
		}
		inside, resume, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			ctx := context.WithoutCancel(t.Context())
			done <- f.RunInTx(ctx, db, "A", 3, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 100 WHERE id = 'A'"); err != nil {
					return err
				}
				close(inside)
				<-resume // frozen after its last statement, before COMMIT
				return nil
			})
		}()
		<-inside
		took, err := nextTransfer(t, db, f, claimsOf("A", 4), 5*time.Second)
		if err != nil {
			t.Fatalf("next holder: got %v after %v", err, took)
		}
		close(resume)
		hErr := <-done
		t.Logf("ended holder: %v", hErr)
		if hErr == nil {
			t.Fatalf("ended holder: got nil, a false success")
		}
		if !errors.Is(hErr, sqlfence.ErrTerminated) {
			t.Errorf("ended holder before COMMIT: got %v, want ErrTerminated (unknown outcome allowed too)", hErr)
		}
		if got, want := bankBalances(t, db), "A=990 B=1010"; got != want {
			t.Errorf("balances: got %s, want %s", got, want)
		}
	})
}

// TestPreemptPostgresRoles (holds?): fence/sql on PostgreSQL, the frozen
// holder and the next one as two roles. Without pg_signal_backend the next
// holder waits and its error names pg_signal_backend; granted it, it ends
// the frozen one.
func TestPreemptPostgresRoles(t *testing.T) {
	testenv.Long(t, "it creates roles and waits out preemptions")
	t.Parallel()
	dsn := pgtest.New(t).NewDatabase(t)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	f, err := sqlfence.NewFences(sqlfence.PostgreSQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), admin); err != nil {
		t.Fatal(err)
	}
	if err := f.Advance(t.Context(), admin, "A", 1); err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	as := func(role string) *sql.DB {
		role += suffix
		mustExec(t, admin, "CREATE ROLE "+role+" LOGIN")
		mustExec(t, admin, "GRANT ALL ON "+sqlfence.DefaultFenceTable+" TO "+role)
		t.Cleanup(func() {
			_, _ = admin.Exec("DROP OWNED BY " + role)
			_, _ = admin.Exec("DROP ROLE " + role)
		})
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.User = role
		cfg.Password = ""
		db := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	one, two := as("sqlone"), as("sqltwo")
	resume := freezeTxOn(t, one, f, "A", 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	err = f.RunInTx(ctx, two, "A", 4, func(*sql.Tx) error { return nil })
	cancel()
	if err == nil || !strings.Contains(err.Error(), "pg_signal_backend") {
		t.Errorf("without pg_signal_backend: got %v, want an error naming it", err)
	}
	mustExec(t, admin, "GRANT pg_signal_backend TO sqltwo"+suffix)
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	err = f.RunInTx(ctx, two, "A", 5, func(*sql.Tx) error { return nil })
	cancel()
	close(resume)
	if err != nil {
		t.Errorf("with pg_signal_backend: got %v, want through", err)
	}
}

// TestPreemptStaleAttemptFrozenBeforeRollback: a stale attempt (token 4,
// the fence at 9) is refused, and its holder freezes before it rolls back
// (Advance in a transaction of its own, as Advance's doc says; RunInTx's
// own rollback after a refusal is the same window). The refused statement
// left the fence's row locked: MariaDB's UPDATE locks the row it did not
// change; PostgreSQL's upsert locks the conflicting row though its WHERE
// refused it, and sets no tag. The next holder (token 10) finds a holder
// that "holds the fence's row without having raised it" (MariaDB) or "no
// fenced transaction" (PostgreSQL) and waits as long as the freeze.
// fence/postgres ends such an attempt (its guard is tagged before it
// waits).
func TestPreemptStaleAttemptFrozenBeforeRollback(t *testing.T) {
	t.Parallel()
	// PostgreSQL only: on MariaDB the refused UPDATE's lock on the row it
	// did not change is not told from an unfenced transaction's, and the
	// next holder waits (the package doc says so).
	srv := servers[3]
	{
		db, f := newBank(t, srv)
		if err := f.Advance(t.Context(), db, "A", 9); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if err := f.Advance(t.Context(), tx, "A", 4); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale attempt: got %v, want ErrStale", err)
		}
		// frozen here, before its rollback
		took, err := nextTransfer(t, db, f, claimsOf("A", 10), 3*time.Second)
		if err != nil {
			t.Errorf("next holder behind a refused attempt frozen before its rollback: got %v after %v, want it through", err, took)
		}
	}
}

// TestPreemptUncoveredWaitError: where nothing is looked at (a *sql.Conn,
// WithoutPreemption), a waiter whose deadline ends while it raises the
// fence says "failed inside the caller's transaction, which cannot commit
// it now": the transaction is RunInTx's own, and what happened is the
// deadline, behind another transaction (issue 47: "Each error names what
// happened"; the same message issue 47 reported for fence/postgres).
func TestPreemptUncoveredWaitError(t *testing.T) {
	t.Parallel()
	preempting(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		if err := f.Advance(t.Context(), db, "A", 1); err != nil {
			t.Fatal(err)
		}
		resume := freezeTxOn(t, db, f, "A", 3)
		defer close(resume)
		conn, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, tt := range []struct {
			name string
			db   sqlfence.TxBeginner
			opts []sqlfence.TxOption
		}{{"*sql.Conn", conn, nil}, {"WithoutPreemption", db, []sqlfence.TxOption{sqlfence.WithoutPreemption()}}} {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			err := f.RunInTx(ctx, tt.db, "A", 4, func(*sql.Tx) error { return nil }, tt.opts...)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "caller's transaction") {
				t.Errorf("%s: got %v, want the deadline, not a failure in the caller's transaction", tt.name, err)
			}
		}
	})
}

// TestPreemptPostgresQualifiedTable (holds?): fence/sql on PostgreSQL
// with a schema-qualified fence table whose names need quoting.
func TestPreemptPostgresQualifiedTable(t *testing.T) {
	t.Parallel()
	db := openPostgres(t)
	mustExec(t, db, `CREATE SCHEMA "My Schema"`)
	f, err := sqlfence.NewFences(sqlfence.PostgreSQL, sqlfence.Identifier{"My Schema", `fen"ces`})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	if err := f.Advance(t.Context(), db, "A", 1); err != nil {
		t.Fatal(err)
	}
	resume := freezeTxOn(t, db, f, "A", 3)
	defer close(resume)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := f.RunInTx(ctx, db, "A", 4, func(*sql.Tx) error { return nil }); err != nil {
		t.Errorf("got %v, want through", err)
	}
}

// TestPreemptAdvanceAlone: Fences.Advance on a *sql.DB (one statement,
// its own transaction) behind a holder frozen with the fence's row: the
// statement is not watched (advance gets no pool), so it waits as long as
// the freeze, and the package doc's "Not covered yet" does not list it.
func TestPreemptAdvanceAlone(t *testing.T) {
	t.Parallel()
	preempting(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		if err := f.Advance(t.Context(), db, "A", 1); err != nil {
			t.Fatal(err)
		}
		resume := freezeTxOn(t, db, f, "A", 3)
		defer close(resume)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		if err := f.Advance(ctx, db, "A", 4); err != nil {
			t.Errorf("Advance alone behind a frozen older holder: got %v after %v, want it through", err, time.Since(start))
		}
	})
}

// TestPreemptIsolationLevels (holds?): the frozen holder and the next one
// both at REPEATABLE READ, then SERIALIZABLE: the next holder ends it and
// goes on, the balances exact.
func TestPreemptIsolationLevels(t *testing.T) {
	t.Parallel()
	preempting(t, func(t *testing.T, srv server) {
		for _, iso := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
			db, f := newBank(t, srv)
			for _, r := range []string{"A", "B"} {
				if err := f.Advance(t.Context(), db, r, 1); err != nil {
					t.Fatal(err)
				}
			}
			inside, resume, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				ctx := context.WithoutCancel(t.Context())
				done <- f.RunInTxAll(ctx, db, claimsOf("A", 2, "B", 3), func(tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 100 WHERE id = 'A'"); err != nil {
						return err
					}
					close(inside)
					<-resume
					_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + 100 WHERE id = 'B'")
					return err
				}, sqlfence.WithTxOptions(sql.TxOptions{Isolation: iso}))
			}()
			<-inside
			took, err := nextTransfer(t, db, f, claimsOf("A", 4, "B", 5), 5*time.Second, sqlfence.WithTxOptions(sql.TxOptions{Isolation: iso}))
			close(resume)
			hErr := <-done
			if err != nil || !errors.Is(hErr, sqlfence.ErrTerminated) {
				t.Errorf("%v: next %v after %v; frozen %v", iso, err, took, hErr)
			}
			if got, want := bankBalances(t, db), "A=990 B=1010"; got != want {
				t.Errorf("%v: balances %s, want %s", iso, got, want)
			}
		}
	})
}

// TestPreemptSeveralWaiters (holds?): two next holders (A=6, A=7) wait on
// a frozen one (A=3). Both end up through, or the older of the two is
// ended by the newer (its token is older); no false success, balances
// exact.
func TestPreemptSeveralWaiters(t *testing.T) {
	t.Parallel()
	preempting(t, func(t *testing.T, srv server) {
		db, f := newBank(t, srv)
		if err := f.Advance(t.Context(), db, "A", 1); err != nil {
			t.Fatal(err)
		}
		z := freezeTx(t, srv, db, f, claimsOf("A", 3), false)
		errs := make(chan error, 2)
		for _, tok := range []int{6, 7} {
			go func() {
				_, err := nextTransfer(t, db, f, claimsOf("A", tok), 5*time.Second)
				errs <- err
			}()
		}
		ok := 0
		for range 2 {
			if err := <-errs; err == nil {
				ok++
			} else if !errors.Is(err, sqlfence.ErrTerminated) && !errors.Is(err, fence.ErrStale) {
				t.Errorf("waiter: %v", err)
			}
		}
		if err := z.result(t); !errors.Is(err, sqlfence.ErrTerminated) {
			t.Errorf("frozen: %v", err)
		}
		if got, want := bankBalances(t, db), fmt.Sprintf("A=%d B=%d", 1000-10*ok, 1000+10*ok); got != want {
			t.Errorf("balances %s, want %s", got, want)
		}
	})
}
