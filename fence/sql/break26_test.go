package sqlfence_test

import (
	"database/sql"
	"path/filepath"
	"runtime"
	"testing"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
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
