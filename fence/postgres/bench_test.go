package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
		"INSERT INTO accounts (id, balance) VALUES ('a', 0)",
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
