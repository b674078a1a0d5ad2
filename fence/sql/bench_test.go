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
		db := openSQLiteDSN(t, "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)")
		// One connection, SQLite's one writer: with a pool of several, an
		// arm that gets a connection whose page cache the other arm's
		// write invalidated pays for re-reading it, and the ratio measures
		// that.
		db.SetMaxOpenConns(1)
		return db
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
// without the fence condition, that again (an A/A check), and that through
// a connection of its own. Goal: fenced/plain <= 1.10.
func BenchmarkRowUpdate(b *testing.B) {
	eachBenchServer(b, func(b *testing.B, srv server, db *sql.DB) {
		ctx := context.Background()
		tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
		if err != nil {
			b.Fatal(err)
		}
		plain := fmt.Sprintf("UPDATE accounts SET balance = %s, fence = %s WHERE id = %s", ph(srv.d, 1), ph(srv.d, 2), ph(srv.d, 3))
		// Each arm writes a value the others did not, so that every update
		// changes the row (MySQL counts rows changed); "again" is the
		// plain update once more, an A/A check of the loop, in a text of
		// its own (a trailing space): a driver that keeps the last
		// statement prepared (modernc.org/sqlite) would otherwise favour
		// it whenever it follows plain.
		// "conn" is the plain update through a connection taken from the
		// pool for it (db.Conn), as the fenced one was before it used the
		// pool directly: in SQLite that path alone moved the time by tens
		// of percent, which this arm keeps in view.
		again, viaConn := plain+" ", plain+"  "
		interleave(b, []string{"plain", "fenced", "again", "conn"}, []func(int) error{
			func(i int) error { _, err := db.ExecContext(ctx, plain, 4*i, 1, "a"); return err },
			func(i int) error { return tbl.Update(ctx, db, "a", 1, sqlfence.Set("balance", 4*i+1)) },
			func(i int) error { _, err := db.ExecContext(ctx, again, 4*i+2, 1, "a"); return err },
			func(i int) error {
				c, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.ExecContext(ctx, viaConn, 4*i+3, 1, "a")
				return err
			},
		})
	})
}

// BenchmarkTx: a transaction with one UPDATE, unfenced and fenced with
// RunInTx, and unfenced again (an A/A check). Goal: fenced/plain <= 1.5.
func BenchmarkTx(b *testing.B) {
	eachBenchServer(b, func(b *testing.B, srv server, db *sql.DB) {
		ctx := context.Background()
		f, err := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable})
		if err != nil {
			b.Fatal(err)
		}
		update := fmt.Sprintf("UPDATE accounts SET balance = %s WHERE id = %s", ph(srv.d, 1), ph(srv.d, 2))
		body := func(q string, i int) func(*sql.Tx) error {
			return func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, q, i, "a"); return err }
		}
		plainTx := func(q string) func(int) error {
			return func(i int) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := body(q, i)(tx); err != nil {
					_ = tx.Rollback()
					return err
				}
				return tx.Commit()
			}
		}
		// "again" has a text of its own, as in BenchmarkRowUpdate.
		interleave(b, []string{"plain", "fenced", "again"}, []func(int) error{
			plainTx(update),
			func(i int) error { return f.RunInTx(ctx, db, "a", 1, body(update, i)) },
			plainTx(update + " "),
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
