package redisfence_test

import (
	"strconv"
	"testing"

	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
)

// BenchmarkHashUpdate compares, on one server and in one run, a Hash's
// Update of two fields (by a holder whose token the hash holds already)
// with the plain read-modify-write of the same fields: HMGET, then HSET.
// The two run in turn within each iteration.
func BenchmarkHashUpdate(b *testing.B) {
	c := client(b)
	h, err := redisfence.NewHash(c, "fence")
	if err != nil {
		b.Fatal(err)
	}
	kPlain, kHash := prefix(b)+"plain", prefix(b)+"hash"
	fields := map[string]string{"balance": "0", "owner": "a"}
	if err := c.HSet(b.Context(), kPlain, "balance", "0", "owner", "a").Err(); err != nil {
		b.Fatal(err)
	}
	if err := h.Set(b.Context(), kHash, 7, fields); err != nil {
		b.Fatal(err)
	}
	inc := func(old map[string]string) (map[string]string, error) {
		n, _ := strconv.Atoi(old["balance"])
		return map[string]string{"balance": strconv.Itoa(n + 1)}, nil
	}
	plain := func() error {
		v, err := c.HMGet(b.Context(), kPlain, "balance", "owner").Result()
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(v[0].(string))
		return c.HSet(b.Context(), kPlain, "balance", strconv.Itoa(n+1)).Err()
	}
	update := func() error { return h.Update(b.Context(), kHash, 7, []string{"balance", "owner"}, inc) }
	d := benchkit.Interleave(b, plain, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "update/plain")
}
