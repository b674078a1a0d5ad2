package redisholder_test

import (
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/fencelock/fencelock/fence/redisholder"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
)

// BenchmarkObtain compares, on one server and in one run, an acquisition
// with a token (redisholder.Obtain, then Release) with the one it
// replaces (redislock.Obtain, then Release), in turn within each
// iteration (benchkit.Interleave). The token costs one more round trip,
// once per acquisition; the fenced writes themselves are the stores'.
func BenchmarkObtain(b *testing.B) {
	c := client(b)
	kPlain, kFenced := key(b), key(b)
	plain := func() error {
		l, err := redislock.Obtain(b.Context(), c, kPlain, time.Minute, nil)
		if err != nil {
			return err
		}
		return l.Release(b.Context())
	}
	fenced := func() error {
		l, err := redisholder.Obtain(b.Context(), c, kFenced, time.Minute, nil)
		if err != nil {
			return err
		}
		return l.Release(b.Context())
	}
	d := benchkit.Interleave(b, plain, fenced)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
}
