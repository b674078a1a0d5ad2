package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// The benchmarks interleave the fenced form and its unfenced twin in one
// loop, on one connection at a time from one pool, alternating which goes
// first, and report each one's time per operation and their ratio. Doing
// both in one loop keeps the ratio honest on a busy machine.

func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	pool := pgtest.NewPool(b)
	ctx := b.Context()
	for _, sql := range []string{
		"CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)",
		"INSERT INTO accounts (id, balance) VALUES ('a', 0), ('b', 0)",
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	if err := postgres.CreateSchema(ctx, pool); err != nil {
		b.Fatal(err)
	}
	return pool
}

// interleave runs each op once per iteration, in rotating order, and
// reports per-op times and the ratio of each later op to the first.
func interleave(b *testing.B, names []string, ops []func(i int) error) {
	b.Helper()
	for _, op := range ops { // warm up: prepare the statements
		if err := op(0); err != nil {
			b.Fatal(err)
		}
	}
	total := make([]time.Duration, len(ops))
	for i := 0; b.Loop(); i++ {
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
	pool := benchPool(b)
	ctx := context.Background()
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		b.Fatal(err)
	}
	const plain = `UPDATE "accounts" SET "balance" = $3, "fence" = $2 WHERE "id" = $1`
	interleave(b, []string{"plain", "fenced"}, []func(int) error{
		func(i int) error { _, err := pool.Exec(ctx, plain, "a", int64(1), i); return err },
		func(i int) error { return tbl.Update(ctx, pool, "a", 1, postgres.Set("balance", i)) },
	})
}

// BenchmarkTx: a transaction with one UPDATE, unfenced, fenced with
// RunInTx (goal: fenced/plain <= 1.5), and as one fenced statement (Exec).
func BenchmarkTx(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	const update = "UPDATE accounts SET balance = $2 WHERE id = $1"
	body := func(i int) func(pgx.Tx) error {
		return func(tx pgx.Tx) error { _, err := tx.Exec(ctx, update, "a", i); return err }
	}
	interleave(b, []string{"plain", "fenced", "exec"}, []func(int) error{
		func(i int) error { return pgx.BeginFunc(ctx, pool, body(i)) },
		func(i int) error { return postgres.RunInTx(ctx, pool, "a", 1, body(i)) },
		func(i int) error { _, err := postgres.Exec(ctx, pool, "a", 1, update, "a", i); return err },
	})
}

// BenchmarkFencedRead: a fenced read (Table.GetForUpdate) in autocommit
// against a plain SELECT of the balance, and SELECT ... FOR UPDATE. The
// fenced read is a holder's every read after its first, with the token the
// row holds already ("fenced": a SELECT, no write); "first" is a first
// claim each time (another row, its token rising: the SELECT, then an
// UPDATE that commits). Goal: fenced/plain <= 1.15.
func BenchmarkFencedRead(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		b.Fatal(err)
	}
	var bal int64
	first := fence.Token(1)
	interleave(b, []string{"plain", "forupdate", "fenced", "first"}, []func(int) error{
		func(int) error {
			return pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", "a").Scan(&bal)
		},
		func(int) error {
			return pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE", "a").Scan(&bal)
		},
		func(int) error { return tbl.GetForUpdate(ctx, pool, "a", 1, []string{"balance"}, &bal) },
		func(int) error { first++; return tbl.GetForUpdate(ctx, pool, "b", first, []string{"balance"}, &bal) },
	})
}

// BenchmarkFencedReadInTx: a read before a write, in one transaction:
// a plain SELECT of the balance, then the UPDATE, against the fenced read
// (Table.GetForUpdate) then the same UPDATE. Goal: fenced/plain <= 1.15.
func BenchmarkFencedReadInTx(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		b.Fatal(err)
	}
	const update = "UPDATE accounts SET balance = $2 WHERE id = $1"
	var bal int64
	interleave(b, []string{"plain", "fenced"}, []func(int) error{
		func(int) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", "a").Scan(&bal); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, update, "a", bal+1)
				return err
			})
		},
		func(int) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := tbl.GetForUpdate(ctx, tx, "a", 1, []string{"balance"}, &bal); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, update, "a", bal+1)
				return err
			})
		},
	})
}

// BenchmarkTransfer: a two-account transfer (read the source's balance,
// take 1 from it, add 1 to the other) in a plain transaction, the same
// transaction fenced on both accounts with RunInTxAll, and the safe form
// of the package documentation (RunInTxAll, Table.GetForUpdate,
// Table.Update with Add). Goal: fenced/plain and safe/plain <= 1.5.
func BenchmarkTransfer(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		b.Fatal(err)
	}
	claims, plain, safe := transferForms(ctx, tbl)
	interleave(b, []string{"plain", "fenced", "safe"}, []func(int) error{
		func(int) error { return pgx.BeginFunc(ctx, pool, plain) },
		func(int) error { return postgres.RunInTxAll(ctx, pool, claims, plain) },
		func(int) error { return postgres.RunInTxAll(ctx, pool, claims, safe) },
	})
}

// BenchmarkRowUpsert: a fenced upsert of an existing row against the
// identical upsert without the fence condition. Goal: fenced/plain <= 1.10.
func BenchmarkRowUpsert(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	tbl, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		b.Fatal(err)
	}
	const plain = `INSERT INTO "accounts" AS cur ("id", "balance", "fence") VALUES ($1, $3, $2)
		ON CONFLICT ("id") DO UPDATE SET "balance" = EXCLUDED."balance", "fence" = EXCLUDED."fence"`
	interleave(b, []string{"plain", "fenced"}, []func(int) error{
		func(i int) error { _, err := pool.Exec(ctx, plain, "a", int64(1), i); return err },
		func(i int) error { return tbl.Upsert(ctx, pool, "a", 1, postgres.Set("balance", i)) },
	})
}

// BenchmarkRowUpdateTelemetry: a fenced row update reporting to the global
// providers with no SDK installed (the default) against the same with the
// OpenTelemetry SDK given with WithMeterProvider and WithTracerProvider
// (metrics to a reader, every span sampled, recorded and kept in memory, as
// the tests read them: the heap grows with every update), alternating in
// one loop. Goal: sdk/nosdk <= 1.03.
func BenchmarkRowUpdateTelemetry(b *testing.B) { rowUpdateTelemetry(b, oteltest.New(b)) }

// BenchmarkRowUpdateTelemetryExported is BenchmarkRowUpdateTelemetry with
// the SDK as an application installs it: every span sampled and recorded,
// then exported through a batch processor (whose exporter drops it).
func BenchmarkRowUpdateTelemetryExported(b *testing.B) {
	rowUpdateTelemetry(b, oteltest.NewExported(b))
}

func rowUpdateTelemetry(b *testing.B, sdk *oteltest.SDK) {
	pool := benchPool(b)
	ctx := context.Background()
	none, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		b.Fatal(err)
	}
	withSDK, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"),
		postgres.WithMeterProvider(sdk.Meters), postgres.WithTracerProvider(sdk.Tracers))
	if err != nil {
		b.Fatal(err)
	}
	interleave(b, []string{"nosdk", "sdk"}, []func(int) error{
		func(i int) error { return none.Update(ctx, pool, "a", 1, postgres.Set("balance", i)) },
		func(i int) error { return withSDK.Update(ctx, pool, "a", 1, postgres.Set("balance", i)) },
	})
}

// BenchmarkStoreUpdate: Store.Update (a claim, then a conditional write)
// against what it replaces, Store.Get then Store.Put.
func BenchmarkStoreUpdate(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Put(ctx, "k", 1, []byte("0")); err != nil {
		b.Fatal(err)
	}
	next := func(r fence.Record) ([]byte, error) { return append(r.Value[:0:0], 'x'), nil }
	interleave(b, []string{"getput", "update"}, []func(int) error{
		func(int) error {
			r, err := s.Get(ctx, "k")
			if err != nil {
				return err
			}
			v, _ := next(r)
			return s.Put(ctx, "k", 1, v)
		},
		func(int) error { return s.Update(ctx, "k", 1, next) },
	})
}

// transferForms returns the two-account transfer of BenchmarkTransfer and
// TestRoundTrips (read a's balance, take 1 from a, add 1 to b), as a plain
// transaction's body and as the safe form of the package documentation
// (Table.GetForUpdate, Table.Update with Add), with the claims of both
// accounts at token 1 for RunInTxAll.
func transferForms(ctx context.Context, tbl *postgres.Table) (claims []fence.Claim, plain, safe func(pgx.Tx) error) {
	const add = "UPDATE accounts SET balance = balance + $2 WHERE id = $1"
	claims = []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}}
	plain = func(tx pgx.Tx) error {
		var bal int64
		if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", "a").Scan(&bal); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, add, "a", -1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, add, "b", 1)
		return err
	}
	safe = func(tx pgx.Tx) error {
		var bal int64
		if err := tbl.GetForUpdate(ctx, tx, "a", 1, []string{"balance"}, &bal); err != nil {
			return err
		}
		if err := tbl.Update(ctx, tx, "a", 1, postgres.Add("balance", -1)); err != nil {
			return err
		}
		return tbl.Update(ctx, tx, "b", 1, postgres.Add("balance", 1))
	}
	return claims, plain, safe
}
