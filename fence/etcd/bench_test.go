package etcdfence_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkPut compares, on one server and in one run, a fenced Put with
// the write it replaces: a plain conditional Txn put,
// If(ModRevision(k) == last) Then(Put(k)), the shortest optimistic write
// etcd has. The two run in turn within each iteration, in alternating order, so
// that load from other processes on the machine falls on both alike; the benchmark reports
// each one's time and their ratio. Goal: fenced/plain ≤ 1.10.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	cli := etcdClient(b)
	s := mustNew(b, cli, prefix(b))
	kPlain := prefix(b) + "plain"
	resp, err := cli.Put(b.Context(), kPlain, string(value))
	if err != nil {
		b.Fatal(err)
	}
	last := resp.Header.Revision
	plain := func() error {
		tr, err := cli.Txn(b.Context()).
			If(clientv3.Compare(clientv3.ModRevision(kPlain), "=", last)).
			Then(clientv3.OpPut(kPlain, string(value))).
			Commit()
		if err == nil && !tr.Succeeded {
			return errors.New("plain conditional put refused")
		}
		if err == nil {
			last = tr.Header.Revision
		}
		return err
	}
	fenced := func() error { return s.Put(b.Context(), "k", 7, value) }
	var tPlain, tFenced time.Duration
	for i := 0; b.Loop(); i++ {
		first, second, t1, t2 := plain, fenced, &tPlain, &tFenced
		if i%2 == 1 { // alternate, so that neither always goes first
			first, second, t1, t2 = fenced, plain, &tFenced, &tPlain
		}
		start := time.Now()
		err := first()
		mid := time.Now()
		err = errors.Join(err, second())
		*t1, *t2 = *t1+mid.Sub(start), *t2+time.Since(mid)
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tPlain.Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(tFenced.Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(tFenced)/float64(tPlain), "fenced/plain")
}
