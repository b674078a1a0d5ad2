package pgadvisory_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
)

// BenchmarkAcquire compares, on one server and in one run, an acquisition
// with a token (pgadvisory.Acquire, then Release) with the one it replaces
// (a connection of its own, pg_advisory_lock, pg_advisory_unlock_all,
// close), in turn within each iteration (benchkit.Interleave). The token
// costs one more round trip (nextval), once per acquisition; the fenced
// writes themselves are the stores'.
func BenchmarkAcquire(b *testing.B) {
	dsn := pgtestDSN(b)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	if err := createSequence(b, cfg); err != nil {
		b.Fatal(err)
	}
	kPlain, kFenced := lockKey(), lockKey()
	plain := func() error {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", kPlain); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		return err
	}
	fenced := func() error {
		l, err := pgadvisory.Acquire(ctx, cfg, kFenced)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
	d := benchkit.Interleave(b, plain, fenced)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
}
