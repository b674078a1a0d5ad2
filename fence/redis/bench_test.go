package redisfence_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
)

// BenchmarkPut compares, on one server and in one run, a fenced Put (one
// script) with the write it replaces, a plain HSET of the value. The two
// run in turn within each iteration, in alternating order, so that load
// from other processes on the machine falls on both alike; the benchmark
// reports each one's time and their ratio. Goal: fenced/plain ≤ 1.15.
//
// With values of 16 bytes and of 1 KiB (sub-benchmarks): a script's own
// cost in Redis grows with its arguments, where HSET's hardly does.
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			value := bytes.Repeat([]byte("x"), size)
			c := client(b)
			s := mustNew(b, c, prefix(b))
			kPlain := prefix(b) + "plain"
			plain := func() error { return c.HSet(b.Context(), kPlain, "value", value).Err() }
			fenced := func() error { return s.Put(b.Context(), "k", 7, value) }
			d := benchkit.Interleave(b, plain, fenced)
			n := float64(b.N)
			b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
			b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
			b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
		})
	}
}

// casScript is the conditional put of the baseline: set the value and
// bump the version if the version is the one read.
var casScript = redis.NewScript(`
if (redis.call('HGET', KEYS[1], 'version') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'version', tonumber(ARGV[1]) + 1)
return 1
`)

// BenchmarkUpdate compares, on one server and in one run, a fenced
// read-modify-write (Store.Update, by a holder whose token is the floor
// already, the common case) with the plain one it replaces: HMGET of the
// value and its version, then a conditional put (a script that writes only
// if the version is the one read). The two run in turn within each
// iteration. Goal: update/plain ≤ 1.25.
func BenchmarkUpdate(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	modify := func(old []byte) []byte { v := bytes.Clone(old); v[0]++; return v }
	c := client(b)
	s := mustNew(b, c, prefix(b))
	kPlain := prefix(b) + "plain"
	if err := c.HSet(b.Context(), kPlain, "value", value, "version", 0).Err(); err != nil {
		b.Fatal(err)
	}
	mustPut(b, s, "update", 7, string(value))
	plain := func() error {
		v, err := c.HMGet(b.Context(), kPlain, "value", "version").Result()
		if err != nil {
			return err
		}
		ok, err := casScript.Run(b.Context(), c, []string{kPlain}, v[1], modify([]byte(v[0].(string)))).Int()
		if err == nil && ok != 1 {
			return errors.New("plain conditional put refused")
		}
		return err
	}
	update := func() error {
		return s.Update(b.Context(), "update", 7, func(old fence.Record) ([]byte, error) { return modify(old.Value), nil })
	}
	d := benchkit.Interleave(b, plain, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "update/plain")
}

// BenchmarkUpdateAll compares, on one server and in one run, a transfer
// between two keys of one hash slot written with one UpdateAll (by a
// holder whose tokens are the floors already) with the same Store's
// Update of one key. The two run in turn within each iteration. Goal
// (issue 47): updateall/update ≤ 1.3.
func BenchmarkUpdateAll(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	modify := func(old []byte) []byte { v := bytes.Clone(old); v[0]++; return v }
	s := mustNew(b, client(b), prefix(b))
	for _, k := range []string{"one", acctA, acctB} {
		mustPut(b, s, k, 7, string(value))
	}
	update := func() error {
		return s.Update(b.Context(), "one", 7, func(old fence.Record) ([]byte, error) { return modify(old.Value), nil })
	}
	updateAll := func() error {
		return s.UpdateAll(b.Context(), both(7), func(old map[string]fence.Record) (map[string][]byte, error) {
			return map[string][]byte{acctA: modify(old[acctA].Value), acctB: modify(old[acctB].Value)}, nil
		})
	}
	d := benchkit.Interleave(b, update, updateAll)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "updateall-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "updateall/update")
}
