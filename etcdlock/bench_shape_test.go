package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// shaped sends, with plain clientv3 calls and none of etcdlock's code, the
// requests of an uncontended etcdlock Lock+Unlock: the create Txn with its
// two compares (the key absent, the lane's marker as last seen), the owner
// record and the predecessor read; the release Txn comparing the key's
// create revision, writing the marker and deleting the key. release names
// a cheaper release, to price each of its parts:
//
//   - "" (shape): the release etcdlock sends;
//   - "nomark": the release Txn without the marker write;
//   - "delete": a plain Delete, as stock Mutex's Unlock;
//   - "txnmark": the release Txn without its compare (the key's create
//     revision): the Delete and the marker write;
//   - "txndel": a Txn of the Delete alone, no compare, no marker: what
//     a Txn costs over a plain Delete.
type shaped struct {
	cli            *clientv3.Client
	lease          clientv3.LeaseID
	q, key, marker string
	value          string
	release        string
	mark, rev      int64
}

func (m *shaped) lock(ctx context.Context) error {
	resp, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(m.key), "=", 0), clientv3.Compare(clientv3.ModRevision(m.marker), "=", m.mark)).
		Then(clientv3.OpPut(m.key, m.value, clientv3.WithLease(m.lease)),
			clientv3.OpGet(m.q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errors.New("shaped: create refused")
	}
	m.rev = resp.Header.Revision
	return nil
}

func (m *shaped) unlock(ctx context.Context) error {
	if m.release == "delete" {
		_, err := m.cli.Delete(ctx, m.key)
		return err
	}
	ops := []clientv3.Op{clientv3.OpDelete(m.key)}
	if m.release == "" || m.release == "txnmark" {
		ops = append(ops, clientv3.OpPut(m.marker, fmt.Sprint(m.rev), clientv3.WithLease(m.lease)))
	}
	txn := m.cli.Txn(ctx)
	if m.release == "" || m.release == "nomark" {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(m.key), "=", m.rev))
	}
	resp, err := txn.Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errors.New("shaped: release refused")
	}
	if m.release == "" || m.release == "txnmark" {
		m.mark = resp.Header.Revision
	}
	return nil
}

func newShaped(tb testing.TB, cli *clientv3.Client, p, release string) *shaped {
	tb.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	id := fmt.Sprintf("%016x-0", int64(s.Lease()))
	q := p + release + "lock/bench/"
	// The size of etcdlock's record for a default owner ("hostname/pid").
	rec := `{"v":1,"owner":"a-host-name-of-20-by/12345","acquired":"2026-12-01T18:00:00.123Z"}`
	return &shaped{cli: cli, lease: s.Lease(), q: q, key: q + id, marker: p + release + "slot/" + id, value: rec, release: release}
}

// BenchmarkRequestShape splits an uncontended Lock+Unlock's cost over
// stock Mutex into the requests' own and etcdlock's client code: it
// alternates, in one loop on one server (rotating which goes first),
// stock Mutex, etcdlock's requests sent by hand (shape, and its cheaper
// releases nomark, delete, txnmark and txndel: see shaped), and etcdlock.
// It reports each one's µs per Lock+Unlock and per Lock, each one's Unlock
// time over a plain Delete's (what each part of the release costs), and
// the ratios shape÷stock (what the requests cost) and etcdlock÷shape (what
// etcdlock's code costs).
func BenchmarkRequestShape(b *testing.B) {
	compact(b)
	cli := etcdClient(b)
	p := prefix(b)
	type arm struct {
		name string
		m    mutex
	}
	arms := []arm{
		{"stock", contenders(b, "stock", 1)[0]},
		{"shape", newShaped(b, cli, p, "")},
		{"etcdlock", contenders(b, "etcdlock", 1)[0]},
		{"nomark", newShaped(b, cli, p, "nomark")},
		{"delete", newShaped(b, cli, p, "delete")},
		{"txnmark", newShaped(b, cli, p, "txnmark")},
		{"txndel", newShaped(b, cli, p, "txndel")},
	}
	total := make([]time.Duration, len(arms))
	locking := make([]time.Duration, len(arms))
	ctx := context.Background()
	i := 0
	for b.Loop() {
		for j := range arms {
			k := (i + j) % len(arms)
			t0 := time.Now()
			if err := arms[k].m.lock(ctx); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := arms[k].m.unlock(ctx); err != nil {
				b.Fatal(err)
			}
			locking[k] += t1.Sub(t0)
			total[k] += time.Since(t0)
		}
		i++
	}
	n := float64(b.N)
	for k, a := range arms {
		b.ReportMetric(float64(total[k].Microseconds())/n, a.name+"-µs/op")
		b.ReportMetric(float64(locking[k].Microseconds())/n, a.name+"-lock-µs/op")
	}
	// Each release's time over a plain Delete's (arms[4]), stock's included.
	for k, a := range arms {
		if k != 4 {
			b.ReportMetric(float64(total[k]-locking[k])/float64(total[4]-locking[4]), a.name+"-unlock/delete")
		}
	}
	b.ReportMetric(float64(total[1])/float64(total[0]), "shape/stock")
	b.ReportMetric(float64(total[2])/float64(total[1]), "etcdlock/shape")
	b.ReportMetric(float64(total[2])/float64(total[0]), "etcdlock/stock")
}
