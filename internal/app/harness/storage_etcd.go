package harness

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// readEtcd reads, from the run's etcd cluster, every revision of each
// key's data key, oldest first: etcd's MVCC store is its own record of the
// writes it applied, and mod revisions are their commit order. It walks
// back from the newest revision with Get WithRev, one revision a request,
// and checks that it found as many as the key's version counts: a
// compacted revision (nothing compacts the harness's cluster: embedetcd
// leaves etcd's auto-compaction off, and no one calls Compact) fails the
// read, rather than checking a history with writes missing.
func readEtcd(ctx context.Context, h *check.Storage, kv clientv3.KV, keys []string) error {
	st, err := newEtcdResource(kv)
	if err != nil {
		return err
	}
	for _, k := range keys {
		revs, err := etcdRevisions(ctx, kv, st.store.DataKey(k))
		if err != nil {
			return err
		}
		res := check.ResourceName(check.ResEtcd, k)
		for _, kv := range revs {
			r, err := decodeEtcdRecord(kv)
			if err != nil {
				return err
			}
			h.Writes[res] = append(h.Writes[res], r)
			h.Final[res] = r.Value
		}
	}
	return nil
}

// etcdRevisions returns every revision of key, oldest first; none when it
// was never written.
func etcdRevisions(ctx context.Context, kv clientv3.KV, key string) ([]*mvccpb.KeyValue, error) {
	resp, err := kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("harness: reading etcd key %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	cur := resp.Kvs[0]
	revs := []*mvccpb.KeyValue{cur}
	for cur.Version > 1 {
		resp, err := kv.Get(ctx, key, clientv3.WithRev(cur.ModRevision-1))
		if err != nil {
			return nil, fmt.Errorf("harness: reading etcd key %s before revision %d (its history must be whole: was the cluster compacted?): %w",
				key, cur.ModRevision, err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].Version != cur.Version-1 {
			return nil, fmt.Errorf("harness: etcd key %s: version %d at revision %d, and no version %d before it",
				key, cur.Version, cur.ModRevision, cur.Version-1)
		}
		cur = resp.Kvs[0]
		revs = append(revs, cur)
	}
	if cur.ModRevision != cur.CreateRevision {
		return nil, fmt.Errorf("harness: etcd key %s: its first version is at revision %d, created at %d", key, cur.ModRevision, cur.CreateRevision)
	}
	slices.Reverse(revs)
	return revs, nil
}

// decodeEtcdRecord reads one revision: the token's digits, then the value,
// as both the fenced Store and the control's plain Put write it.
func decodeEtcdRecord(kv *mvccpb.KeyValue) (check.Record, error) {
	tok, val, err := parseEtcdRecord(kv.Value)
	if err != nil {
		return check.Record{}, fmt.Errorf("harness: etcd key %s at revision %d: %w", kv.Key, kv.ModRevision, err)
	}
	return check.Record{Token: tok, Value: val}, nil
}
