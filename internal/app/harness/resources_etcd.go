package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
)

// etcdPrefix is the prefix of the etcd Store's keys in a run's cluster
// (the run's own, so one prefix serves every run). Nothing else writes
// under it.
const etcdPrefix = "fencecheck/store/"

// etcdTimeout bounds one etcd write or read of a worker, from after its
// nemesis hold: a request the nemesis makes late is delivered only once its
// caller gives up, and a holder should not sit on its lock for the whole
// writeTimeout meanwhile.
const etcdTimeout = 3 * time.Second

// etcdResource is a key of the run's etcd cluster, written through the
// worker's own client: fenced, with fence/etcd's Store (one Txn comparing
// the key's floor); in the control, with a plain Put of the record the
// Store would write.
type etcdResource struct {
	kv    clientv3.KV
	store *etcdfence.Store
}

func newEtcdResource(kv clientv3.KV) (etcdResource, error) {
	st, err := etcdfence.New(kv, etcdPrefix)
	return etcdResource{kv: kv, store: st}, err
}

func (e etcdResource) write(ctx context.Context, fenced bool, key string, tok fence.Token, val string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if fenced {
		return e.store.Put(ctx, key, tok, []byte(val))
	}
	_, err := e.kv.Put(ctx, e.store.DataKey(key), etcdRecord(tok, val))
	return err
}

// read returns the key's value: a linearizable Get, through the worker's
// proxies.
func (e etcdResource) read(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	rec, err := e.store.Get(ctx, key)
	if errors.Is(err, fence.ErrNotFound) {
		return "", nil
	}
	return string(rec.Value), err
}

// etcdRecord is a data key's value as fence/etcd stores it: the token in
// etcdfence.TokenDigits digits, then the value.
func etcdRecord(tok fence.Token, val string) string {
	return fmt.Sprintf("%0*d%s", etcdfence.TokenDigits, int64(tok), val)
}

// parseEtcdRecord reads a data key's value written by etcdRecord or the
// Store.
func parseEtcdRecord(b []byte) (int64, string, error) {
	if len(b) < etcdfence.TokenDigits {
		return 0, "", fmt.Errorf("%d bytes, shorter than a token", len(b))
	}
	tok, err := strconv.ParseInt(string(b[:etcdfence.TokenDigits]), 10, 64)
	if err != nil || tok <= 0 {
		return 0, "", fmt.Errorf("no token in %q", b[:etcdfence.TokenDigits])
	}
	return tok, string(b[etcdfence.TokenDigits:]), nil
}
