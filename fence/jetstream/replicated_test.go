package jsfence_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// clusterBucket returns, on each node of a new 3-node cluster, a bucket
// replicated on all three.
func clusterBucket(t *testing.T) []jetstream.KeyValue {
	t.Helper()
	var kvs []jetstream.KeyValue
	for i, s := range natstest.NewCluster(t, 3) {
		nc, err := nats.Connect(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		var kv jetstream.KeyValue
		if i == 0 {
			// The nodes answer before JetStream's meta group has all three
			// peers: until then a 3-replica bucket cannot be placed (10005,
			// "no suitable peers for placement", once in CI) or JetStream
			// is not available yet (10008).
			poll.Until(t, "a 3-replica bucket on the new cluster", func() bool {
				kv, err = js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "r3", Replicas: 3})
				var api *jetstream.APIError
				return err == nil || !errors.As(err, &api) || (api.ErrorCode != 10005 && api.ErrorCode != 10008)
			})
		} else {
			kv, err = js.KeyValue(t.Context(), "r3")
		}
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, kv)
	}
	return kvs
}

// newOn returns a Store on kv, without CheckRevisions, which a replicated
// bucket on nats-server 2.9 fails (TestReplicatedCheckRevisions).
func newOn(t *testing.T, kv jetstream.KeyValue) *jsfence.Store {
	t.Helper()
	s, err := jsfence.New(kv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// On a replicated bucket any replica answers a read (a direct get), and a
// follower may answer before it has the last write. GetForUpdate with the
// token the key holds already must still return the key's last record,
// and one with a token lower than the key's must be refused: the read
// alone, which may be behind, cannot tell.
func TestReplicatedGetForUpdate(t *testing.T) {
	testenv.Long(t, "starts a 3-node cluster")
	kvs := clusterBucket(t)
	w := newOn(t, kvs[0])
	newer := newOn(t, kvs[0])
	const rounds = 200
	for n, kv := range kvs {
		r := newOn(t, kv)
		behind, notStale := 0, 0
		for i := range rounds {
			k := fmt.Sprint("k", n, "-", i)
			mustPut(t, w, k, 5, "a")
			mustPut(t, w, k, 5, "b")
			if got, err := r.GetForUpdate(t.Context(), k, 5); err != nil {
				t.Fatalf("GetForUpdate(%q, 5): got %v, want nil", k, err)
			} else if string(got.Value) != "b" {
				behind++
			}
			mustPut(t, newer, k, 9, "c")
			if _, err := r.GetForUpdate(t.Context(), k, 5); !errors.Is(err, fence.ErrStale) {
				notStale++
			}
		}
		if behind != 0 || notStale != 0 {
			t.Errorf("through node %d, of %d rounds: %d GetForUpdate returned the record before the last, %d were not refused after a newer token's write", n, rounds, behind, notStale)
		}
	}
}
