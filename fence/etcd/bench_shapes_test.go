package etcdfence_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdfence "github.com/fencelock/fencelock/fence/etcd"
)

// BenchmarkPutShapes prices, with plain clientv3 requests and none of the
// Store's code, the transaction forms a fenced Put could take, against a
// plain conditional put (If(ModRevision(k) = last) Then(Put(k))), each on
// a key of its own, in turn within each iteration in rotating order, 1 KiB
// values, the writer's token equal to the floor (a holder's repeated
// writes, the common case) but for first:
//
//   - nested: the same-token compare in a nested Txn, as the Store sent
//     it from ff7c091 to e1b4ab9: If(Value(floor) > tok) Then(Get(floor))
//     Else(Txn(If(Value(floor) = tok, ModRevision(floor) > seen)
//     Then(Get(floor)) Else(Put(floor, tok), Put(data))));
//   - stamped: one flat Txn, the floor's value the token and a stamp
//     after it, which the write raises (the last revision seen, plus
//     one): If(Value(floor) > "tok:stamp-1") Then(Get(floor))
//     Else(Put(floor, "tok:stamp"), Put(data)); a floor of the token with a
//     stamp at least the write's refuses it, a lower token's floor, or a
//     missing one, lets it land (b3932e1 took it, and a breaking review
//     found it unsafe: a stamp is the writer's own, so a late write of one
//     Store landed over another's later write of the token, stamped
//     lower);
//   - twocmp: one flat Txn with two compares, If(Value(floor) < tok+1,
//     ModRevision(floor) < seen+1) Then(Put(floor, tok), Put(data))
//     Else(Get(floor)), the Store's form for a holder's repeated writes
//     (a6e959a; its first write of a key, a floor of a lower token put at
//     any revision, takes first);
//   - first: If(Value(floor) > tok-1) Then(Get(floor)) Else(Put(floor,
//     tok), Put(data)), the Store's form for a holder's first write of the
//     key, each write a token higher than the last.
//
// It reports each form's time ÷ the plain put's.
func BenchmarkPutShapes(b *testing.B) {
	value := string(bytes.Repeat([]byte("x"), 1024))
	cli := etcdClient(b)
	p := prefix(b)
	pad := func(n int64) string { return fmt.Sprintf("%0*d", etcdfence.TokenDigits, n) }
	tok, next := pad(7), pad(8)
	var seen int64
	saw := func(h int64) { seen = max(seen, h) }
	put := func(k, v string) int64 {
		r, err := cli.Put(b.Context(), k, v)
		if err != nil {
			b.Fatal(err)
		}
		saw(r.Header.Revision)
		return r.Header.Revision
	}
	dPlain := p + "plain"
	last := put(dPlain, value)
	fNested, dNested := p+"nested/f", p+"nested/d"
	fStamped, dStamped := p+"stamped/f", p+"stamped/d"
	fTwo, dTwo := p+"twocmp/f", p+"twocmp/d"
	fFirst, dFirst := p+"first/f", p+"first/d"
	firstTok := int64(7)
	put(fFirst, pad(firstTok))
	put(fNested, tok)
	put(fStamped, tok+":"+pad(0))
	put(fTwo, tok)
	landed := func(name string, r *clientv3.TxnResponse, err error, ok func(*clientv3.TxnResponse) bool) error {
		if err != nil {
			return err
		}
		saw(r.Header.Revision)
		if !ok(r) {
			return errors.New(name + ": refused")
		}
		return nil
	}
	forms := []struct {
		name  string
		write func() error
		took  time.Duration
	}{
		{"plain", func() error {
			r, err := cli.Txn(b.Context()).If(clientv3.Compare(clientv3.ModRevision(dPlain), "=", last)).Then(clientv3.OpPut(dPlain, value)).Commit()
			if err == nil && r.Succeeded {
				last = r.Header.Revision
			}
			return landed("plain", r, err, func(r *clientv3.TxnResponse) bool { return r.Succeeded })
		}, 0},
		{"nested", func() error {
			r, err := cli.Txn(b.Context()).
				If(clientv3.Compare(clientv3.Value(fNested), ">", tok)).
				Then(clientv3.OpGet(fNested)).
				Else(clientv3.OpTxn(
					[]clientv3.Cmp{clientv3.Compare(clientv3.Value(fNested), "=", tok), clientv3.Compare(clientv3.ModRevision(fNested), ">", seen)},
					[]clientv3.Op{clientv3.OpGet(fNested)},
					[]clientv3.Op{clientv3.OpPut(fNested, tok), clientv3.OpPut(dNested, value)})).
				Commit()
			return landed("nested", r, err, func(r *clientv3.TxnResponse) bool {
				return !r.Succeeded && !r.Responses[0].GetResponseTxn().Succeeded
			})
		}, 0},
		{"stamped", func() error {
			stamp := seen + 1
			r, err := cli.Txn(b.Context()).
				If(clientv3.Compare(clientv3.Value(fStamped), ">", tok+":"+pad(stamp-1))).
				Then(clientv3.OpGet(fStamped)).
				Else(clientv3.OpPut(fStamped, tok+":"+pad(stamp)), clientv3.OpPut(dStamped, value)).
				Commit()
			return landed("stamped", r, err, func(r *clientv3.TxnResponse) bool { return !r.Succeeded })
		}, 0},
		{"twocmp", func() error {
			r, err := cli.Txn(b.Context()).
				If(clientv3.Compare(clientv3.Value(fTwo), "<", next), clientv3.Compare(clientv3.ModRevision(fTwo), "<", seen+1)).
				Then(clientv3.OpPut(fTwo, tok), clientv3.OpPut(dTwo, value)).
				Else(clientv3.OpGet(fTwo)).
				Commit()
			return landed("twocmp", r, err, func(r *clientv3.TxnResponse) bool { return r.Succeeded })
		}, 0},
		{"first", func() error {
			firstTok++
			r, err := cli.Txn(b.Context()).
				If(clientv3.Compare(clientv3.Value(fFirst), ">", pad(firstTok-1))).
				Then(clientv3.OpGet(fFirst)).
				Else(clientv3.OpPut(fFirst, pad(firstTok)), clientv3.OpPut(dFirst, value)).
				Commit()
			return landed("first", r, err, func(r *clientv3.TxnResponse) bool { return !r.Succeeded })
		}, 0},
	}
	for i := 0; b.Loop(); i++ {
		for j := range forms {
			f := &forms[(i+j)%len(forms)]
			t0 := time.Now()
			if err := f.write(); err != nil {
				b.Fatal(err)
			}
			f.took += time.Since(t0)
		}
	}
	for _, f := range forms[1:] {
		b.ReportMetric(float64(f.took)/float64(forms[0].took), f.name+"/plain")
	}
}
