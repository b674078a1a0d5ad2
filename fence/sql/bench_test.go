package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
)

// The benchmarks interleave the fenced form and its unfenced twin in one
// loop, on one pool, alternating which goes first, and report each one's
// time per operation and their ratio, as fence/postgres's do: both in one
// loop keeps the ratio honest on a busy machine. SQLite runs with
// busy_timeout and WAL, as the package documentation advises.

// benchServers are the servers the benchmarks run on, each opened as an
// application would.
var benchServers = []server{
	servers[0],
	{"MariaDB interpolateParams", sqlfence.MySQL, func(t testing.TB) *sql.DB {
		cfg := mysqltest.New(t).NewDatabase(t)
		cfg.InterpolateParams = true // no server-side prepare per statement
		return mysqltest.Open(t, cfg)
	}},
	{"SQLite", sqlfence.SQLite, func(t testing.TB) *sql.DB {
		return openSQLiteDSN(t, "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)")
	}},
	servers[3],
}

func eachBenchServer(b *testing.B, fn func(b *testing.B, srv server, db *sql.DB)) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			db := srv.open(b)
			for _, q := range []string{accountsDDL(srv.d), "INSERT INTO accounts (id, balance) VALUES ('a', 0)"} {
				if _, err := db.ExecContext(b.Context(), q); err != nil {
					b.Fatal(err)
				}
			}
			if err := sqlfence.CreateSchema(b.Context(), db, srv.d); err != nil {
				b.Fatal(err)
			}
			fn(b, srv, db)
		})
	}
}

// interleave runs each op once per iteration, in rotating order, and
// reports per-op times and the ratio of each later op to the first.
func interleave(b *testing.B, names []string, ops []func(i int) error) {
	b.Helper()
	for _, op := range ops { // warm up
		if err := op(0); err != nil {
			b.Fatal(err)
		}
	}
	total := make([]time.Duration, len(ops))
	for i := 1; b.Loop(); i++ {
		for j := range ops {
			k := (i + j) % len(ops)
			start := time.Now()
			if err := ops[k](i); err != nil {
				b.Fatal(err)
			}
			total[k] += time.Since(start)
		}
	}
	for k, name := range names {
		b.ReportMetric(float64(total[k].Microseconds())/float64(b.N), name+"-µs/op")
		if k > 0 {
			b.ReportMetric(float64(total[k])/float64(total[0]), name+"/"+names[0])
		}
	}
}

// BenchmarkRowUpdate: a fenced row update against the identical UPDATE
// without the fence condition. Goal: fenced/plain <= 1.10.
func BenchmarkRowUpdate(b *testing.B) {
	eachBenchServer(b, func(b *testing.B, srv server, db *sql.DB) {
		ctx := context.Background()
		tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
		if err != nil {
			b.Fatal(err)
		}
		plain := fmt.Sprintf("UPDATE accounts SET balance = %s, fence = %s WHERE id = %s", ph(srv.d, 1), ph(srv.d, 2), ph(srv.d, 3))
		interleave(b, []string{"plain", "fenced"}, []func(int) error{
			// Each writes a value the other did not, so that every update
			// changes the row (MySQL counts rows changed).
			func(i int) error { _, err := db.ExecContext(ctx, plain, 2*i, 1, "a"); return err },
			func(i int) error { return tbl.Update(ctx, db, "a", 1, sqlfence.Set("balance", 2*i+1)) },
		})
	})
}

// BenchmarkTx: a transaction with one UPDATE, unfenced and fenced with
// RunInTx. Goal: fenced/plain <= 1.5.
func BenchmarkTx(b *testing.B) {
	eachBenchServer(b, func(b *testing.B, srv server, db *sql.DB) {
		ctx := context.Background()
		f, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable})
		if err != nil {
			b.Fatal(err)
		}
		update := fmt.Sprintf("UPDATE accounts SET balance = %s WHERE id = %s", ph(srv.d, 1), ph(srv.d, 2))
		body := func(i int) func(*sql.Tx) error {
			return func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, update, i, "a"); return err }
		}
		interleave(b, []string{"plain", "fenced"}, []func(int) error{
			func(i int) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := body(i)(tx); err != nil {
					_ = tx.Rollback()
					return err
				}
				return tx.Commit()
			},
			func(i int) error { return f.RunInTx(ctx, db, "a", 1, body(i)) },
		})
	})
}

// BenchmarkStorePut: Store.Put against the identical upsert without the
// fence condition.
func BenchmarkStorePut(b *testing.B) {
	eachBenchServer(b, func(b *testing.B, srv server, db *sql.DB) {
		ctx := context.Background()
		s, err := sqlfence.NewStore(db, srv.d, sqlfence.Identifier{sqlfence.DefaultStoreTable})
		if err != nil {
			b.Fatal(err)
		}
		plain := fmt.Sprintf(`INSERT INTO fencelock_store ("key", token, value) VALUES (%s, %s, %s) ON CONFLICT ("key") DO UPDATE SET value = excluded.value, token = excluded.token`,
			ph(srv.d, 1), ph(srv.d, 2), ph(srv.d, 3))
		if srv.d == sqlfence.MySQL {
			plain = "INSERT INTO fencelock_store (`key`, token, value) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value), token = VALUES(token)"
		}
		value := func(i int) []byte { return fmt.Appendf(make([]byte, 0, 256), "%0256d", i) }
		interleave(b, []string{"plain", "fenced"}, []func(int) error{
			func(i int) error { _, err := db.ExecContext(ctx, plain, "k", 1, value(2*i)); return err },
			func(i int) error { return s.Put(ctx, "k", 1, value(2*i+1)) },
		})
	})
}
