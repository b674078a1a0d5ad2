package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// A pool the application closed is not kept reachable by a Table that
// kept its statements prepared on it: once another pool's statement is
// prepared, the closed one's are dropped and the pool can be collected
// (the cache held it, and a place of its 64, as long as the Table lived).
// The control, WithoutPrepare, keeps nothing.
func TestPreparedClosedPoolReleased(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sqlfence.TableOption
	}{
		{"prepared", nil},
		{"WithoutPrepare (control)", []sqlfence.TableOption{sqlfence.WithoutPrepare()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{"accounts"},
				append([]sqlfence.TableOption{sqlfence.WithKeyColumn("id")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			collected := make(chan struct{})
			writeAndClose(t, tbl, filepath.Join(t.TempDir(), "closed.db"), collected)
			db := openSQLite(t)
			mustExec(t, db, accountsDDL(sqlfence.SQLite))
			if err := tbl.Upsert(t.Context(), db, "a", 1, sqlfence.Set("balance", 1)); err != nil {
				t.Fatalf("Upsert on the second pool: got %v, want nil", err)
			}
			poll.Until(t, "the closed pool collected", func() bool {
				runtime.GC()
				select {
				case <-collected:
					return true
				default:
					return false
				}
			})
			runtime.KeepAlive(tbl)
		})
	}
}

// writeAndClose opens a pool on path, writes through tbl, closes the pool
// and arranges for collected to be closed when the pool is collected.
func writeAndClose(t *testing.T, tbl *sqlfence.Table, path string, collected chan struct{}) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	runtime.AddCleanup(db, func(ch chan struct{}) { close(ch) }, collected)
	mustExec(t, db, accountsDDL(sqlfence.SQLite))
	if err := tbl.Upsert(t.Context(), db, "a", 1, sqlfence.Set("balance", 1)); err != nil {
		t.Fatalf("Upsert: got %v, want nil", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// With interpolateParams=true the MySQL driver needs no server-side
// statement for a statement with arguments. When the server refuses to
// prepare more (max_prepared_stmt_count, global to the server, reached by
// any application), a statement kept prepared on one connection and run
// on another must not fail where the unprepared one works: the refusal
// (1461) ran nothing, and the write is sent unprepared. The control,
// WithoutPrepare, is what the write did before statements were kept.
func TestPreparedStmtLimitInterpolated(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sqlfence.Option
	}{
		{"prepared", nil},
		{"WithoutPrepare (control)", []sqlfence.Option{sqlfence.WithoutPrepare()}},
	} {
		t.Run(tc.name, func(t *testing.T) { testStmtLimit(t, tc.opts) })
	}
}

func testStmtLimit(t *testing.T, opts []sqlfence.Option) {
	ctx := t.Context()
	cfg := mysqltest.New(t).NewDatabase(t)
	cfg.InterpolateParams = true
	db := mysqltest.Open(t, cfg)
	mustExec(t, db, accountsDDL(sqlfence.MySQL))
	mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1)")
	var topts []sqlfence.TableOption
	for _, o := range opts {
		topts = append(topts, o)
	}
	tbl, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"accounts"}, append(topts, sqlfence.WithKeyColumn("id"))...)
	if err != nil {
		t.Fatal(err)
	}
	fences, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := fences.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	// Kept prepared on the pool's one connection.
	if err := tbl.Update(ctx, db, "a", 2, sqlfence.Set("balance", 2)); err != nil {
		t.Fatalf("Update 2: got %v, want nil", err)
	}
	if err := fences.RunInTx(ctx, db, "r", 2, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatalf("RunInTx 2: got %v, want nil", err)
	}
	limitPreparedStmts(t, db, 0)
	// The first connection is taken: the writes get another, where the
	// statements are not prepared yet.
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	if err := tbl.Update(ctx, db, "a", 3, sqlfence.Set("balance", 3)); err != nil {
		t.Fatalf("Update 3 with no room for a prepared statement: got %v, want nil", err)
	}
	if err := fences.RunInTx(ctx, db, "r", 3, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatalf("RunInTx 3 with no room for a prepared statement: got %v, want nil", err)
	}
	fencewant.Stale(t, tbl.Update(ctx, db, "a", 2, sqlfence.Set("balance", 0)), 2, 3)
	fencewant.Stale(t, fences.RunInTx(ctx, db, "r", 2, func(*sql.Tx) error { return nil }), 2, 3)
	wantAccount(t, server{d: sqlfence.MySQL}, db, "a", 3, 3)
}

// limitPreparedStmts sets MariaDB's max_prepared_stmt_count to n until t
// ends.
func limitPreparedStmts(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	var old int
	if err := db.QueryRowContext(t.Context(), "SELECT @@GLOBAL.max_prepared_stmt_count").Scan(&old); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", n))
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", old)); err != nil {
			t.Errorf("restoring max_prepared_stmt_count: %v", err)
		}
	})
}

// Every connection of the pool killed on the server (its statements gone
// with them): the next writes prepare again on new connections and fence
// as before; none fails or reports an unknown outcome, since the driver
// finds a killed connection dead before it writes to it.
func TestPreparedConnectionsKilled(t *testing.T) {
	ctx := t.Context()
	srv := servers[0]
	db, tbl := newAccounts(t, srv)
	fences, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := fences.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	admin := mysqltest.Open(t, mysqltest.New(t).Config(""))
	var name string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	for tok := int64(1); tok <= 3; tok++ {
		if err := tbl.Upsert(ctx, db, "a", fence.Token(tok), sqlfence.Set("balance", tok)); err != nil {
			t.Fatalf("Upsert %d: got %v, want nil", tok, err)
		}
		if err := fences.RunInTx(ctx, db, "r", fence.Token(tok), func(*sql.Tx) error { return nil }); err != nil {
			t.Fatalf("RunInTx %d: got %v, want nil", tok, err)
		}
		if n := killConnections(t, admin, name); n == 0 {
			t.Fatalf("killed no connection of database %s", name)
		}
	}
	fencewant.Stale(t, tbl.Update(ctx, db, "a", 2, sqlfence.Set("balance", 0)), 2, 3)
	fencewant.Stale(t, fences.RunInTx(ctx, db, "r", 2, func(*sql.Tx) error { return nil }), 2, 3)
	wantAccount(t, srv, db, "a", 3, 3)
}

// killConnections kills every connection using database name, and returns
// how many.
func killConnections(t *testing.T, admin *sql.DB, name string) int {
	t.Helper()
	rows, err := admin.QueryContext(t.Context(), "SELECT id FROM information_schema.processlist WHERE db = ?", name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	for _, id := range ids {
		mustExec(t, admin, fmt.Sprintf("KILL CONNECTION %d", id))
	}
	return len(ids)
}

// Statements kept prepared in SQLite hold no read transaction open: after
// many fenced writes through a pool of several connections, a checkpoint
// from another handle copies the whole WAL back and truncates it (busy 0),
// and the WAL grew no more than with WithoutPrepare.
func TestPreparedSQLiteCheckpoint(t *testing.T) {
	sizes := map[string]int64{}
	for _, tc := range []struct {
		name string
		opts []sqlfence.TableOption
	}{
		{"prepared", nil},
		{"WithoutPrepare", []sqlfence.TableOption{sqlfence.WithoutPrepare()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "wal.db")
			db := openSQLitePath(t, path, "?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=busy_timeout(5000)")
			db.SetMaxOpenConns(4)
			mustExec(t, db, accountsDDL(sqlfence.SQLite))
			tbl, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{"accounts"}, append(tc.opts, sqlfence.WithKeyColumn("id"))...)
			if err != nil {
				t.Fatal(err)
			}
			const writes = 2000
			for i := range writes {
				key := fmt.Sprintf("k%d", i%50)
				if err := tbl.Upsert(ctx, db, key, fence.Token(i+1), sqlfence.Set("balance", i), sqlfence.Set("note", "x")); err != nil {
					t.Fatalf("Upsert %d: got %v, want nil", i, err)
				}
			}
			fi, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			sizes[tc.name] = fi.Size()
			other := openSQLitePath(t, path, "?_pragma=journal_mode(WAL)")
			var busy, log, done int
			if err := other.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil {
				t.Fatal(err)
			}
			if busy != 0 || log != 0 {
				t.Fatalf("checkpoint from another handle: got busy %d, log %d, checkpointed %d; want busy 0, log 0", busy, log, done)
			}
		})
	}
	t.Logf("WAL size after the writes: prepared %d bytes, WithoutPrepare %d bytes", sizes["prepared"], sizes["WithoutPrepare"])
	if p, u := sizes["prepared"], sizes["WithoutPrepare"]; p > 2*u+1<<20 {
		t.Fatalf("WAL size: got %d bytes with statements kept prepared, want about the %d of WithoutPrepare", p, u)
	}
}

func openSQLitePath(t *testing.T, path, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// An argument the driver cannot convert fails before anything is sent: it
// is bad input, not a write of unknown outcome.
func TestUnconvertibleArgument(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, tbl := newAccounts(t, srv)
		mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1)")
		err := tbl.Update(t.Context(), db, "a", 2, sqlfence.Set("balance", struct{ X int }{1}))
		if !errors.Is(err, sqlfence.ErrInvalidArgument) || !errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("Update with an unconvertible value: got %v, want sqlfence.ErrInvalidArgument", err)
		}
		err = tbl.Upsert(t.Context(), db, "b", 2, sqlfence.Set("balance", make(chan int)))
		if !errors.Is(err, sqlfence.ErrInvalidArgument) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("Upsert with an unconvertible value: got %v, want sqlfence.ErrInvalidArgument", err)
		}
		wantAccount(t, srv, db, "a", 0, 1)
	})
}

// Many writers on a pool of two connections, each a fenced transaction
// (its fence statement kept prepared, run through tx.StmtContext) that
// writes the row through the transaction, or a fenced Upsert on the pool:
// no hang, no error but ErrStale (or ErrRetryable for SQLite's busy lock
// inside the caller's transaction), and the row ends at the highest
// acknowledged token with that write's value.
func TestPreparedConcurrentWriters(t *testing.T) {
	for _, srv := range []server{servers[0], servers[2]} {
		t.Run(srv.name, func(t *testing.T) { testConcurrentWriters(t, srv) })
	}
}

func testConcurrentWriters(t *testing.T, srv server) {
	ctx := t.Context()
	db, tbl := newAccounts(t, srv)
	db.SetMaxOpenConns(2)
	db.SetConnMaxLifetime(20 * time.Millisecond)
	fences, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable}, sqlfence.WithRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := fences.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 0)")
	var next atomic.Int64
	var mu sync.Mutex
	acked := int64(0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 15 {
				tok := next.Add(1)
				var err error
				if w%2 == 0 {
					err = fences.RunInTx(ctx, db, "a", fence.Token(tok), func(tx *sql.Tx) error {
						return tbl.Update(ctx, tx, "a", fence.Token(tok), sqlfence.Set("balance", tok))
					})
				} else {
					err = tbl.Upsert(ctx, db, "a", fence.Token(tok), sqlfence.Set("balance", tok))
				}
				switch {
				case err == nil:
					mu.Lock()
					acked = max(acked, tok)
					mu.Unlock()
				case errors.Is(err, fence.ErrStale):
				case errors.Is(err, sqlfence.ErrRetryable) && srv.d == sqlfence.SQLite:
				default:
					t.Errorf("writer %d, token %d: got %v, want nil or fence.ErrStale", w, tok, err)
				}
			}
		})
	}
	wg.Wait()
	bal, fen, _ := account(t, srv, db, "a")
	if fen < acked || bal != fen {
		t.Fatalf("row: got balance %d fence %d, want the fence at least %d, the highest acknowledged, and the balance equal to it", bal, fen, acked)
	}
}

// A busy rollback of a fenced statement run in the caller's own
// transaction (not retried: it returns ErrRetryable) is counted in
// fencelock.sql.retryable_errors, which counts each rollback the server
// asked to retry "whether or not it was retried"; so is one of
// Fences.Advance in the caller's transaction. The control is the same
// write outside a transaction with WithRetries(0), which was counted.
func TestTelemetryRetryableInTx(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, tbl *sqlfence.Table, fences *sqlfence.Fences, db *sql.DB) error
	}{
		{"Update in the caller's transaction", func(ctx context.Context, tbl *sqlfence.Table, _ *sqlfence.Fences, db *sql.DB) error {
			return inTx(ctx, db, func(tx *sql.Tx) error { return tbl.Update(ctx, tx, "a", 10, sqlfence.Set("balance", 10)) })
		}},
		{"Advance in the caller's transaction", func(ctx context.Context, _ *sqlfence.Table, fences *sqlfence.Fences, db *sql.DB) error {
			return inTx(ctx, db, func(tx *sql.Tx) error { return fences.Advance(ctx, tx, "r", 10) })
		}},
		{"Update on the pool (control)", func(ctx context.Context, tbl *sqlfence.Table, _ *sqlfence.Fences, db *sql.DB) error {
			return tbl.Update(ctx, db, "a", 10, sqlfence.Set("balance", 10))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			otel := oteltest.New(t)
			ctx := t.Context()
			db, tbl := newAccounts(t, servers[2], sqlfence.WithRetries(0), sqlfence.WithMeterProvider(otel.Meters))
			fences, err := sqlfence.NewFences(sqlfence.SQLite, sqlfence.Identifier{sqlfence.DefaultFenceTable},
				sqlfence.WithRetries(0), sqlfence.WithMeterProvider(otel.Meters))
			if err != nil {
				t.Fatal(err)
			}
			if err := fences.CreateTable(ctx, db); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1)")
			lock, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback() }()
			mustExec(t, lock, "UPDATE accounts SET note = 'held'")
			if err := tc.write(ctx, tbl, fences, db); !errors.Is(err, sqlfence.ErrRetryable) {
				t.Fatalf("write while another connection writes: got %v, want ErrRetryable", err)
			}
			if got := otel.Sum(t, "fencelock.sql.retryable_errors"); got != 1 {
				t.Errorf("fencelock.sql.retryable_errors: got %d, want 1", got)
			}
		})
	}
}

// inTx runs fn in a transaction of db, rolled back afterwards.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// commitTx runs fn in a transaction of db, committed when fn returns nil
// and rolled back otherwise.
func commitTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// With interpolateParams=true the driver sends unprepared statements as
// text with the arguments spliced in, and the statements kept prepared in
// the binary protocol: both read the counts and insert ids the fence
// relies on alike (a rewrite of the same values with the same token, a
// refused upsert, the Store's LAST_INSERT_ID signal, the fence table's).
func TestInterpolateParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sqlfence.Option
	}{{"prepared", nil}, {"WithoutPrepare", []sqlfence.Option{sqlfence.WithoutPrepare()}}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			cfg := mysqltest.New(t).NewDatabase(t)
			cfg.InterpolateParams = true
			db := mysqltest.Open(t, cfg)
			mustExec(t, db, accountsDDL(sqlfence.MySQL))
			var topts []sqlfence.TableOption
			for _, o := range tc.opts {
				topts = append(topts, o)
			}
			tbl, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"accounts"}, append(topts, sqlfence.WithKeyColumn("id"))...)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second time, the same values with the same token
				if err := tbl.Upsert(ctx, db, "a", 5, sqlfence.Set("balance", 50)); err != nil {
					t.Fatalf("Upsert 5: got %v, want nil", err)
				}
			}
			for range 2 {
				if err := tbl.Update(ctx, db, "a", 6, sqlfence.Set("balance", 60)); err != nil {
					t.Fatalf("Update 6: got %v, want nil", err)
				}
			}
			fencewant.Stale(t, tbl.Upsert(ctx, db, "a", 4, sqlfence.Set("balance", 40)), 4, 6)
			fencewant.Stale(t, tbl.Update(ctx, db, "a", 4, sqlfence.Set("balance", 40)), 4, 6)
			wantAccount(t, server{d: sqlfence.MySQL}, db, "a", 60, 6)
			store, err := sqlfence.NewStore(db, sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultStoreTable}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.CreateTable(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := store.Put(ctx, "k", 3, []byte("v")); err != nil {
					t.Fatalf("Put 3: got %v, want nil", err)
				}
			}
			fencewant.Stale(t, store.Put(ctx, "k", 2, []byte("old")), 2, 3)
			fencewant.Stale(t, store.Delete(ctx, "k", 1), 1, 3)
			fences, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := fences.CreateTable(ctx, db); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := fences.RunInTx(ctx, db, "r", 7, func(*sql.Tx) error { return nil }); err != nil {
					t.Fatalf("RunInTx 7: got %v, want nil", err)
				}
			}
			fencewant.Stale(t, fences.RunInTx(ctx, db, "r", 6, func(*sql.Tx) error { return nil }), 6, 7)
			fencewant.Stale(t, fences.Advance(ctx, db, "r", 6), 6, 7)
		})
	}
}
