package etcdfence_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
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

// BenchmarkUpdate compares, on one server and in one run, a fenced
// read-modify-write (Store.Update, by a holder whose token is the floor
// already, the common case) with the two it replaces: the plain optimistic
// read-modify-write etcd has, Get(k) then If(ModRevision(k) == read's)
// Then(Put(k)), and the Store's own Get then Put, which fences the write
// only. The three run in turn within each iteration, in rotating order.
// Goal: update/plain ≤ 1.25.
func BenchmarkUpdate(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	modify := func(old []byte) []byte { v := bytes.Clone(old); v[0]++; return v }
	cli := etcdClient(b)
	s := mustNew(b, cli, prefix(b))
	kPlain := prefix(b) + "plain"
	if _, err := cli.Put(b.Context(), kPlain, string(value)); err != nil {
		b.Fatal(err)
	}
	mustPut(b, s, "getput", 7, string(value))
	mustPut(b, s, "update", 7, string(value))
	plain := func() error { return plainReadModifyWrite(b, cli, kPlain, modify) }
	getPut := func() error {
		r, err := s.Get(b.Context(), "getput")
		if err != nil {
			return err
		}
		return s.Put(b.Context(), "getput", 7, modify(r.Value))
	}
	update := func() error {
		return s.Update(b.Context(), "update", 7, func(old fence.Record) ([]byte, error) { return modify(old.Value), nil })
	}
	d := benchkit.Interleave(b, plain, getPut, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "getput-ns/op")
	b.ReportMetric(float64(d[2].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[2])/float64(d[0]), "update/plain")
	b.ReportMetric(float64(d[2])/float64(d[1]), "update/getput")
}

// plainReadModifyWrite is etcd's optimistic read-modify-write of k, with no
// fence: a Get, then a put conditional on the mod revision read.
func plainReadModifyWrite(b *testing.B, cli *clientv3.Client, k string, modify func([]byte) []byte) error {
	resp, err := cli.Get(b.Context(), k)
	if err != nil {
		return err
	}
	kv := resp.Kvs[0]
	tr, err := cli.Txn(b.Context()).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
		Then(clientv3.OpPut(k, string(modify(kv.Value)))).
		Commit()
	if err == nil && !tr.Succeeded {
		return errors.New("plain conditional put refused")
	}
	return err
}

// BenchmarkUpdateAll compares, on one server and in one run, a transfer
// between two keys written with one UpdateAll (by a holder whose tokens
// are the floors already, the common case) with the same Store's Update
// of one key. The two run in turn within each iteration, in alternating
// order. Goal (issue 47): updateall/update ≤ 1.3.
func BenchmarkUpdateAll(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	modify := func(old []byte) []byte { v := bytes.Clone(old); v[0]++; return v }
	s := mustNew(b, etcdClient(b), prefix(b))
	for _, k := range []string{"one", "a", "b"} {
		mustPut(b, s, k, 7, string(value))
	}
	claims := []fence.Claim{{Resource: "a", Token: 7}, {Resource: "b", Token: 7}}
	update := func() error {
		return s.Update(b.Context(), "one", 7, func(old fence.Record) ([]byte, error) { return modify(old.Value), nil })
	}
	updateAll := func() error {
		return s.UpdateAll(b.Context(), claims, func(old map[string]fence.Record) (map[string][]byte, error) {
			return map[string][]byte{"a": modify(old["a"].Value), "b": modify(old["b"].Value)}, nil
		})
	}
	d := benchkit.Interleave(b, update, updateAll)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "updateall-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "updateall/update")
}
