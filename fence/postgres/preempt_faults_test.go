package postgres_test

// Review of the preemption change (issue 47, item 1): tests that fail on
// 2162988. Each says what it shows.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// holdOpen runs run in a goroutine; the function run gets waits, once its
// work is done, until the returned release is called. It returns once
// that point is reached, with the channel of run's result.
func holdOpen(t *testing.T, run func(ctx context.Context, hold func()) error) (release func(), done chan error) {
	t.Helper()
	inside, rel := make(chan struct{}), make(chan struct{})
	done = make(chan error, 1)
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	go func() {
		ctx := context.WithoutCancel(t.Context())
		done <- run(ctx, func() { close(inside); <-rel })
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("holder ended before holding: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("holder did not reach its hold in 10 s")
	}
	t.Cleanup(release)
	return release, done
}

func wait(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("no result in 15 s")
		return nil
	}
}

// TestPreemptNestedTagStaleWaiterKillsLiveHolder: the tag is the
// last guard's, not the transaction's. A live holder X (A at token 9, the
// newest) then raises B with token 5 in the same transaction: a nested
// RunInTx (db a pgx.Tx, which the change documents WithPreemptAfter for),
// two Advance calls in a transaction it manages itself (as Advance's doc
// says to), or Exec in its pgx.Tx. Its session now says "fencelock:t=5-5"
// while it holds A's fence row at 9. A stale attempt on A with token 7 (a
// holder whose lease on A ended before X got it) waits on X, reads 5-5 as
// "older than 7", ends X's live transaction, and then commits its own
// stale write, which the fence (A at 9) would have refused.
func TestPreemptNestedTagStaleWaiterKillsLiveHolder(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name string
		run  func(ctx context.Context, pool *pgxpool.Pool, hold func()) error
	}{
		{"nested RunInTx", func(ctx context.Context, pool *pgxpool.Pool, hold func()) error {
			return postgres.RunInTx(ctx, pool, "A", 9, func(tx pgx.Tx) error {
				if err := postgres.RunInTx(ctx, tx, "B", 5, func(pgx.Tx) error { return nil }); err != nil {
					return err
				}
				hold() // live: working, its leases on A and B alive
				_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
				return err
			})
		}},
		{"Advance twice in the caller's transaction", func(ctx context.Context, pool *pgxpool.Pool, hold func()) error {
			fences, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable})
			if err != nil {
				return err
			}
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := fences.Advance(ctx, tx, "A", 9); err != nil {
					return err
				}
				if err := fences.Advance(ctx, tx, "B", 5); err != nil {
					return err
				}
				hold()
				_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
				return err
			})
		}},
		{"Exec in RunInTx", func(ctx context.Context, pool *pgxpool.Pool, hold func()) error {
			return postgres.RunInTx(ctx, pool, "A", 9, func(tx pgx.Tx) error {
				if _, err := postgres.Exec(ctx, tx, "B", 5, "UPDATE accounts SET balance = balance + 1 WHERE id = 'B'"); err != nil {
					return err
				}
				hold()
				_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
				return err
			})
		}},
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := newBank(t)
			release, xDone := holdOpen(t, func(ctx context.Context, hold func()) error { return w.run(ctx, pool, hold) })
			_, staleErr := next(t, pool, claims("A", 7), time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
				return postgres.RunInTx(ctx, pool, "A", 7, fn, postgres.WithPreemptAfter(50*time.Millisecond))
			})
			release()
			xErr := wait(t, xDone)
			if xErr != nil {
				t.Errorf("live holder X (A at 9, newest): got %v, want its commit: a stale attempt (A at 7) ended it", xErr)
			}
			if staleErr == nil {
				t.Errorf("stale attempt (A at 7, X holds A at 9): got nil, its write committed; want ErrStale (or its deadline)")
			}
			t.Logf("balances %s", balances(t, pool))
		})
	}
}

// TestPreemptNestedTagSameHolder: the same holder (a MultiLock with
// A=10, C=25, B=40, all valid) runs two transactions at once: one on A
// that nests a RunInTx on C (its tag becomes 25-25), and RunInTxHeld over
// A and B. The second waits on A, reads 25-25 (no token of its own, below
// its newest, holder valid) and ends the holder's own first transaction.
func TestPreemptNestedTagSameHolder(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	release, firstDone := holdOpen(t, func(ctx context.Context, hold func()) error {
		return postgres.RunInTx(ctx, pool, "A", 10, func(tx pgx.Tx) error {
			if err := postgres.RunInTx(ctx, tx, "C", 25, func(pgx.Tx) error { return nil }); err != nil {
				return err
			}
			hold()
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = 'A'")
			return err
		})
	})
	h := &claimer{claims: claims("A", 10, "B", 40)}
	_, secondErr := next(t, pool, h.claims, 700*time.Millisecond, func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTxHeld(ctx, pool, h, fn, postgres.WithPreemptAfter(50*time.Millisecond))
	})
	release()
	if err := wait(t, firstDone); err != nil {
		t.Errorf("the holder's own first transaction: got %v, want its commit (its second one, RunInTxHeld, ended it; second: %v)", err, secondErr)
	}
}

// TestPreemptQueuedBehindWaiter (holds): the frozen process had a
// second transaction of its own (same tokens) whose guard was already
// waiting on the first when it froze. An ON CONFLICT guard waits on the
// frozen transaction's xid itself, not on a tuple lock that the queued
// waiter holds (PostgreSQL 15), so pg_blocking_pids names the frozen
// transaction and the next holder ends it.
func TestPreemptQueuedBehindWaiter(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	// The fence rows exist already, as they do for any resource written
	// before: the waiters then queue on the row's tuple lock.
	if err := postgres.RunInTxAll(t.Context(), pool, claims("A", 1, "B", 1), func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	old := claims("A", 2, "B", 3)
	f := freeze(t, pool, old)
	secondDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		secondDone <- postgres.RunInTxAll(ctx, pool, old, func(pgx.Tx) error { return nil })
	}()
	waitLockWaiters(t, pool, 1)
	took, err := next(t, pool, claims("A", 4, "B", 5), 2*time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTxAll(ctx, pool, claims("A", 4, "B", 5), fn)
	})
	f.let()
	second := <-secondDone
	t.Logf("next: %v after %v; frozen: %v; its second: %v", err, took, f.result(t), second)
	if err != nil {
		t.Fatalf("next holder behind a frozen holder and its own queued transaction: got %v after %v, want it through well within 2 s", err, took)
	}
}

// blockingTracer stops a pool's queries whose SQL contains match until
// release is closed: the holder's process frozen at that statement.
type blockingTracer struct {
	match   string
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, b.match) {
		b.once.Do(func() { close(b.reached) })
		<-b.release
	}
	return ctx
}

func (b *blockingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPreemptStaleAttemptFrozenAfterGuard: a stale attempt's guard
// fails its WHERE but still locks the fence row (ON CONFLICT DO UPDATE
// does), and its RETURNING, which sets the tag, yields nothing. RunInTx
// then reads the current token (stale()) before it rolls back. A holder
// frozen there holds the row untagged: the next holder, though newer than
// every token involved, ends nothing and waits as long as the freeze.
func TestPreemptStaleAttemptFrozenAfterGuard(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	if err := postgres.RunInTx(t.Context(), pool, "A", 5, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	bt := &blockingTracer{match: "SELECT token FROM", reached: make(chan struct{}), release: make(chan struct{})}
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = bt
	stalePool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stalePool.Close)
	staleDone := make(chan error, 1)
	go func() {
		staleDone <- postgres.RunInTx(context.WithoutCancel(t.Context()), stalePool, "A", 3, func(pgx.Tx) error { return nil })
	}()
	select {
	case <-bt.reached:
	case err := <-staleDone:
		t.Fatalf("stale attempt: got %v before its freeze", err)
	}
	took, err := next(t, pool, claims("A", 8), 2*time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTx(ctx, pool, "A", 8, fn)
	})
	close(bt.release)
	if serr := <-staleDone; !errors.Is(serr, fence.ErrStale) {
		t.Errorf("stale attempt: got %v, want ErrStale", serr)
	}
	if err != nil {
		t.Fatalf("next holder (A at 8) behind a frozen stale attempt (A at 3, refused, row locked, untagged): got %v after %v, want it through", err, took)
	}
}

// slowReads is a connection whose reply to a statement naming
// pg_blocking_pids arrives d late, as after a pause of the waiter's
// process (GC, CPU starvation) or a slow network: the server has
// evaluated the list, the watch acts on it d later.
type slowReads struct {
	net.Conn
	d       time.Duration
	mu      sync.Mutex
	delay   bool
	queried chan struct{}
	once    *sync.Once
}

func (c *slowReads) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("pg_blocking_pids")) {
		c.mu.Lock()
		c.delay = true
		c.mu.Unlock()
		defer c.once.Do(func() { close(c.queried) })
	}
	return c.Conn.Write(p)
}

func (c *slowReads) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	d := c.delay
	c.delay = false
	c.mu.Unlock()
	if d && n > 0 {
		time.Sleep(c.d)
	}
	return n, err
}

// TestPreemptTerminateReusedSession: the watch reads the blockers'
// pids and tags in one statement and ends them by pid in another. A
// blocker that ends its transaction in between (an older but live holder
// finishing), whose session the pool then hands to a new transaction, has
// that new transaction ended: here a live holder of another resource.
func TestPreemptTerminateReusedSession(t *testing.T) {
	testenv.Long(t, "it waits out a preemption and a reused session")
	t.Parallel()
	pool, _ := newBank(t)
	plain := freezePlain(t, pool, "B") // keeps the waiter's guard waiting after A

	vcfg := pool.Config().Copy()
	vcfg.MaxConns = 1
	poolV, err := pgxpool.NewWithConfig(t.Context(), vcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(poolV.Close)

	queried := make(chan struct{})
	var once sync.Once
	wcfg := pool.Config().Copy()
	wcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	dial := wcfg.ConnConfig.DialFunc
	wcfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowReads{Conn: c, d: 600 * time.Millisecond, queried: queried, once: &once}, nil
	}
	poolW, err := pgxpool.NewWithConfig(t.Context(), wcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(poolW.Close)

	pid := func(ctx context.Context, tx pgx.Tx) int {
		var p int
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&p); err != nil {
			t.Error(err)
		}
		return p
	}
	var oldPid, victimPid int
	releaseOld, oldDone := holdOpen(t, func(ctx context.Context, hold func()) error {
		return postgres.RunInTx(ctx, poolV, "A", 2, func(tx pgx.Tx) error {
			oldPid = pid(ctx, tx)
			hold()
			return nil
		})
	})
	wDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		wDone <- postgres.RunInTxAll(ctx, poolW, claims("A", 4, "B", 5), func(pgx.Tx) error { return nil },
			postgres.WithPreemptAfter(50*time.Millisecond))
	}()
	select {
	case <-queried:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter's watch never looked")
	}
	time.Sleep(50 * time.Millisecond) // the server has answered by now
	releaseOld()                      // the older holder, live, finishes first
	if err := wait(t, oldDone); err != nil {
		t.Fatalf("older holder: %v", err)
	}
	victimIn, victimDone := make(chan struct{}), make(chan error, 1)
	go func() {
		ctx := context.WithoutCancel(t.Context())
		victimDone <- postgres.RunInTx(ctx, poolV, "Z", 100, func(tx pgx.Tx) error {
			victimPid = pid(ctx, tx)
			close(victimIn)
			time.Sleep(1500 * time.Millisecond) // a live holder at work
			_, err := tx.Exec(ctx, "SELECT 1")
			return err
		})
	}()
	<-victimIn
	victimErr := wait(t, victimDone)
	plain.let()
	t.Logf("waiter: %v", wait(t, wDone))
	t.Logf("old pid %d, victim pid %d", oldPid, victimPid)
	if oldPid != victimPid {
		t.Fatalf("the pool (one connection) gave the victim another session (%d, not %d)", victimPid, oldPid)
	}
	if err := victimErr; err != nil {
		t.Fatalf("a live holder of Z on the session the older holder of A had left: got %v, want its commit", err)
	}
}

// TestPreemptExecWaits: Exec's guard is the same fence-row lock, but
// nothing watches it: the next holder's Exec waits as long as the freeze.
func TestPreemptExecWaits(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	f := freeze(t, pool, claims("A", 2, "B", 3))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := postgres.Exec(ctx, pool, "A", 4, "UPDATE accounts SET balance = balance - 10 WHERE id = 'A'")
	took := time.Since(start)
	f.let()
	if err != nil {
		t.Fatalf("next holder's Exec behind a frozen holder: got %v after %v, want it through", err, took)
	}
}

// TestPreemptTableClaimInCallerTx: a holder that claimed a row with
// Table.GetForUpdate in a transaction it opened, then froze, stalls the
// next holder's Table.Update of that row as long as the freeze (issue 47
// lists Table claims).
func TestPreemptTableClaimInCallerTx(t *testing.T) {
	t.Parallel()
	pool, tbl := newBank(t)
	_, _ = holdOpen(t, func(ctx context.Context, hold func()) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var b int64
			if err := tbl.GetForUpdate(ctx, tx, "A", 2, []string{"balance"}, &b); err != nil {
				return err
			}
			hold()
			return tbl.Update(ctx, tx, "A", 2, postgres.Set("balance", b-100))
		})
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := tbl.Update(ctx, pool, "A", 4, postgres.Add("balance", -10))
	if err != nil {
		t.Fatalf("next holder's Table.Update behind a frozen Table claim: got %v after %v, want it through", err, time.Since(start))
	}
}

// TestPreemptKilledGuardError: RunInTxAll's guard tags the
// transaction as soon as it raised its first row, then waits on the next:
// a newer holder may end it right there. Its error then says "the
// connection broke inside the caller's transaction", the wording issue 47
// complained of, for a transaction that was the library's own.
func TestPreemptKilledGuardError(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	plain := freezePlain(t, pool, "B")
	oldDone := make(chan error, 1)
	go func() {
		oldDone <- postgres.RunInTxAll(context.WithoutCancel(t.Context()), pool, claims("A", 3, "B", 4), func(pgx.Tx) error { return nil })
	}()
	waitLockWaiters(t, pool, 1)
	time.Sleep(50 * time.Millisecond)
	_, err := next(t, pool, claims("A", 9), 5*time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTx(ctx, pool, "A", 9, fn)
	})
	if err != nil {
		t.Fatalf("newer holder: %v", err)
	}
	plain.let()
	oldErr := wait(t, oldDone)
	if !errors.Is(oldErr, postgres.ErrTerminated) {
		t.Fatalf("older transaction ended in its guard: got %v, want ErrTerminated", oldErr)
	}
	if strings.Contains(oldErr.Error(), "caller's transaction") || strings.Contains(oldErr.Error(), "connection broke") {
		t.Errorf("older transaction ended in its guard: error %q names a broken connection in the caller's transaction; want it to say a newer holder ended it", oldErr)
	}
}

// panicTracer panics on the guard's statement after delay.
type panicTracer struct{ delay time.Duration }

func (p panicTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "ON CONFLICT (resource)") {
		time.Sleep(p.delay)
		panic("tracer")
	}
	return ctx
}

func (panicTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPreemptWatchOutlivesPanic: guard calls stop() only when
// advance returns; a panic in it (a QueryTracer's, pgx's) leaves the
// watch goroutine and its connection polling every 250 ms until ctx ends,
// which for context.Background() is never.
func TestPreemptWatchOutlivesPanic(t *testing.T) {
	testenv.Long(t, "it waits out a preemption after a panic")
	t.Parallel()
	pool, _ := newBank(t)
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = panicTracer{delay: 400 * time.Millisecond}
	pp, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pp.Close)
	ctx, cancel := context.WithCancel(t.Context()) // stands for a ctx that never ends
	defer cancel()
	func() {
		defer func() { _ = recover() }()
		_ = postgres.RunInTx(ctx, pp, "A", 2, func(pgx.Tx) error { return nil })
	}()
	time.Sleep(600 * time.Millisecond)
	var watching int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_blocking_pids(%' AND state <> 'idle' AND pid <> pg_backend_pid()").Scan(&watching); err != nil {
		t.Fatal(err)
	}
	if watching != 0 {
		t.Fatalf("after RunInTx panicked and returned: %d watch session(s) still polling, want none", watching)
	}
}

// TestPreemptHeldCommitAndIsolation (holds): a holder frozen just
// before its COMMIT gets ErrTerminated (and ErrUnknownOutcome: the COMMIT
// was sent after its session was ended, which the client cannot tell from
// an end during it), never success; a waiter under REPEATABLE READ and
// SERIALIZABLE goes on after it ends the blocker (no serialization
// failure: the blocker aborted); balances exact.
func TestPreemptHeldCommitAndIsolation(t *testing.T) {
	t.Parallel()
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			pool, _ := newBank(t)
			release, oldDone := holdOpen(t, func(ctx context.Context, hold func()) error {
				return postgres.RunInTxAll(ctx, pool, claims("A", 2, "B", 3), func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 100 WHERE id = 'A'")
					if err == nil {
						_, err = tx.Exec(ctx, "UPDATE accounts SET balance = balance + 100 WHERE id = 'B'")
					}
					hold() // frozen between fn and COMMIT
					return err
				})
			})
			took, err := next(t, pool, claims("A", 4, "B", 5), 5*time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
				return postgres.RunInTxAll(ctx, pool, claims("A", 4, "B", 5), fn, postgres.WithIsolation(iso))
			})
			release()
			oldErr := wait(t, oldDone)
			if err != nil || took > 2*time.Second {
				t.Errorf("next holder: %v after %v", err, took)
			}
			if !errors.Is(oldErr, postgres.ErrTerminated) {
				t.Errorf("frozen before COMMIT: got %v, want ErrTerminated", oldErr)
			}
			t.Logf("old: unknown outcome %v", errors.Is(oldErr, fence.ErrUnknownOutcome))
			if got := balances(t, pool); got != "A=990 B=1010" {
				t.Errorf("balances %s, want A=990 B=1010", got)
			}
		})
	}
}

// pidProxy is a connection pooler's front as far as the pid goes: it
// passes the protocol through and tells clients a backend pid of its own
// (BackendKeyData), as PgBouncer, PgCat and PgDog do (a random one there).
func pidProxy(t *testing.T, server string, pid uint32) string {
	t.Helper()
	return msgProxy(t, server, func(typ byte, body []byte) bool {
		if typ == 'K' {
			binary.BigEndian.PutUint32(body, pid)
		}
		return true
	})
}

// msgProxy passes the protocol through to server, each of the server's
// messages through edit, which may change its body and reports whether
// to pass it on.
func msgProxy(t *testing.T, server string, edit func(typ byte, body []byte) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", server)
			if err != nil {
				_ = c.Close()
				continue
			}
			track(c)
			track(s)
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(s)
				for {
					hdr := make([]byte, 5)
					if _, err := io.ReadFull(r, hdr); err != nil {
						return
					}
					body := make([]byte, binary.BigEndian.Uint32(hdr[1:])-4)
					if _, err := io.ReadFull(r, body); err != nil {
						return
					}
					if !edit(hdr[0], body) {
						continue
					}
					if _, err := c.Write(append(hdr, body...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPreemptPoolerPid: behind a pooler the pid a connection reports
// is not its backend's, so pg_blocking_pids(pid) finds nothing (or, with
// the random pid past int4, could not be asked): the blocker is found by
// the fence rows' xmax instead, which needs the rows to exist before the
// frozen transaction (a first claim's new row is invisible to the watch).
func TestPreemptPoolerPid(t *testing.T) {
	t.Parallel()
	pool, _ := newBank(t)
	if err := postgres.RunInTxAll(t.Context(), pool, claims("A", 1, "B", 1), func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i, pid := range []uint32{0x7ff0_0001, 0xfff0_0001} {
		base := 10 * i
		cfg := pool.Config().Copy()
		addr := pidProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), pid)
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
		proxied, err := pgxpool.NewWithConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxied.Close)
		f := freeze(t, pool, claims("A", base+2, "B", base+3))
		newer := claims("A", base+4, "B", base+5)
		took, err := next(t, proxied, newer, 1500*time.Millisecond, func(ctx context.Context, fn func(pgx.Tx) error) error {
			return postgres.RunInTxAll(ctx, proxied, newer, fn)
		})
		f.let()
		_ = f.result(t)
		if err != nil {
			t.Errorf("pid %#x: next holder behind a pooler: got %v after %v, want it through", pid, err, took)
		}
	}
}

// TestPreemptHeldCtxEndsMidDial (holds): the watch's dial honours
// ctx; the guard returns at its deadline, naming the context.
func TestPreemptHeldCtxEndsMidDial(t *testing.T) {
	testenv.Long(t, "it waits out a held dial")
	t.Parallel()
	pool, _ := newBank(t)
	cfg := pool.Config().Copy()
	cfg.MaxConns = 1
	var (
		mu    sync.Mutex
		dials int
	)
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if n > 1 { // the watch's (and, after the test, the pool's own: bounded)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
				return nil, errors.New("dial blocked")
			}
		}
		return dial(ctx, network, addr)
	}
	p, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f := freeze(t, pool, claims("A", 2, "B", 3))
	took, err := next(t, p, claims("A", 4, "B", 5), 600*time.Millisecond, func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTxAll(ctx, p, claims("A", 4, "B", 5), fn)
	})
	f.let()
	if !errors.Is(err, context.DeadlineExceeded) || took > 900*time.Millisecond || !strings.Contains(err.Error(), "the context ended") {
		t.Fatalf("got %v after %v, want the deadline at 600 ms, named", err, took)
	}
	t.Logf("%v", err)
}

// TestPreemptWatchStaleCredentials: the watch connects with the
// transaction's connection's config, frozen when that pooled connection
// was made, not with the pool's BeforeConnect (rotated passwords, IAM
// tokens valid 15 min, Vault's dynamic roles). Once the credential it was
// made with no longer logs in (here: the role made NOLOGIN, as a revoked
// credential is), every watch fails to connect, and the next holder waits
// as long as the freeze, though its pool connects fine.
func TestPreemptWatchStaleCredentials(t *testing.T) {
	t.Parallel()
	admin, _ := newBank(t)
	roles := []string{"rot_frozen", "rot_one", "rot_two"}
	for _, role := range roles {
		mustExec(t, admin, "CREATE ROLE "+role+" LOGIN")
		mustExec(t, admin, "GRANT ALL ON accounts, "+postgres.DefaultFenceTable+" TO "+role)
		mustExec(t, admin, "GRANT pg_signal_backend TO "+role)
	}
	t.Cleanup(func() {
		for _, role := range roles {
			_, _ = admin.Exec(context.WithoutCancel(t.Context()), "DROP OWNED BY "+role)
			_, _ = admin.Exec(context.WithoutCancel(t.Context()), "DROP ROLE "+role)
		}
	})
	frozenPool := poolAs(t, admin, "rot_frozen")
	var (
		mu   sync.Mutex
		user = "rot_one"
	)
	cfg := admin.Config().Copy()
	cfg.MaxConns = 1
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		mu.Lock()
		defer mu.Unlock()
		cc.User = user // the current credential
		return nil
	}
	p, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	mustExec(t, p, "SELECT 1") // the pooled connection, made with rot_one
	mu.Lock()
	user = "rot_two" // rotated; the old credential is revoked
	mu.Unlock()
	mustExec(t, admin, "ALTER ROLE rot_one NOLOGIN")

	f := freeze(t, frozenPool, claims("A", 2, "B", 3))
	took, err := next(t, p, claims("A", 4, "B", 5), 2*time.Second, func(ctx context.Context, fn func(pgx.Tx) error) error {
		return postgres.RunInTxAll(ctx, p, claims("A", 4, "B", 5), fn)
	})
	f.let()
	if err != nil {
		t.Fatalf("next holder, its pool's credential rotated: got %v after %v, want it through", err, took)
	}
}
