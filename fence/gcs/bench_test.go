package gcsfence_test

import (
	"bytes"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
)

// BenchmarkPut compares, on one server and in one run, a fenced Put (a
// read of the header, then a write with ifGenerationMatch) with the
// store's plain put, one unconditional write of the same bytes in one
// request. Goal: fenced/plain ≤ 1.15. The server is fake-gcs-server in the
// test process: the figures are the library's and the fake's, not Cloud
// Storage's.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	c := client(b)
	p := fencewant.Prefix(b)
	s := mustNew(b, c, gcsfence.WithPrefix(p))
	plain := func() error {
		w := c.Bucket(gcstest.Bucket).Object(p + "plain").NewWriter(b.Context())
		w.ChunkSize = 0
		_, err := w.Write(value)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	}
	fenced := func() error { return s.Put(b.Context(), "k", 7, value) }
	d := benchkit.Interleave(b, plain, fenced)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
}

// BenchmarkUpdate compares a fenced read-modify-write (Update by a holder
// whose token the object holds already) with the plain one: a read of the
// object, then a write with ifGenerationMatch on the generation read.
// Goal: update/plain ≤ 1.25.
func BenchmarkUpdate(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	c := client(b)
	p := fencewant.Prefix(b)
	s := mustNew(b, c, gcsfence.WithPrefix(p))
	obj := c.Bucket(gcstest.Bucket).Object(p + "plain")
	w := obj.NewWriter(b.Context())
	w.Write(value)
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	fencewant.Put(b, s, "k", 7, string(value))
	plain := func() error {
		r, err := obj.NewReader(b.Context())
		if err != nil {
			return err
		}
		buf := new(bytes.Buffer)
		buf.ReadFrom(r)
		r.Close()
		w := obj.If(storage.Conditions{GenerationMatch: r.Attrs.Generation}).NewWriter(b.Context())
		w.ChunkSize = 0
		v := buf.Bytes()
		v[0]++
		_, err = w.Write(v)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	}
	update := func() error {
		return s.Update(b.Context(), "k", 7, func(old fence.Record) ([]byte, error) { v := bytes.Clone(old.Value); v[0]++; return v, nil })
	}
	d := benchkit.Interleave(b, plain, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "update/plain")
}
