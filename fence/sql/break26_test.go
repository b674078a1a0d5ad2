package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
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
