package jsfence_test

import (
	"bytes"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
)

// BenchmarkPut compares, on one server and in one run, a fenced Put (one
// kv.Update on the revision the Store last wrote, with the header before
// the value) with the store's plain write, one kv.Put of the same value.
// Goal: fenced/plain ≤ 1.15. A bare kv.Update on the key's revision runs
// beside them, to tell the server's cost of the condition (cond/plain)
// from the Store's own (fenced/cond).
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	kv, _ := bucket(b)
	s := mustNew(b, kv)
	rev, err := kv.Put(b.Context(), "cond", value)
	if err != nil {
		b.Fatal(err)
	}
	plain := func() error { _, err := kv.Put(b.Context(), "plain", value); return err }
	fenced := func() error { return s.Put(b.Context(), "k", 7, value) }
	cond := func() (err error) { rev, err = kv.Update(b.Context(), "cond", value, rev); return err }
	d := benchkit.Interleave(b, plain, fenced, cond)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
	b.ReportMetric(float64(d[2])/float64(d[0]), "cond/plain")
	b.ReportMetric(float64(d[1])/float64(d[2]), "fenced/cond")
}

// BenchmarkUpdate compares a fenced read-modify-write (Update by a holder
// whose token the key holds already) with the plain one: a kv.Get, then a
// kv.Update on the revision read. Goal: update/plain ≤ 1.25.
func BenchmarkUpdate(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	kv, _ := bucket(b)
	s := mustNew(b, kv)
	if _, err := kv.Put(b.Context(), "plain", value); err != nil {
		b.Fatal(err)
	}
	mustPut(b, s, "k", 7, string(value))
	plain := func() error {
		e, err := kv.Get(b.Context(), "plain")
		if err != nil {
			return err
		}
		v := bytes.Clone(e.Value())
		v[0]++
		_, err = kv.Update(b.Context(), "plain", v, e.Revision())
		return err
	}
	update := func() error {
		return s.Update(b.Context(), "k", 7, func(old fence.Record) ([]byte, error) { old.Value[0]++; return old.Value, nil })
	}
	d := benchkit.Interleave(b, plain, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "update/plain")
}
