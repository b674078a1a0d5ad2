package etcdlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
)

// TestTokensFromAReplacedCluster points a resource that a holder of one
// etcd cluster wrote to at a new cluster, as a user replacing etcd would:
// the new cluster's holder is refused (its tokens start again low), with
// an error matching ErrStale and ErrTokenRegressed. The control, a stale
// holder of the first cluster, is refused with ErrStale alone: a newer
// holder does exist there.
func TestTokensFromAReplacedCluster(t *testing.T) {
	ctx := t.Context()
	store := fence.NewMemoryStore()
	old := newLocker(t, etcdClient(t))
	for range 20 { // the old cluster's revision moves on
		mustLock(t, old, "warmup").Unlock(ctx)
	}
	early := mustLock(t, old, "a") // held, with an older token than the next
	defer early.Unlock(ctx)
	late := mustLock(t, old, "b")
	if err := guardPut(t, late, store, "k"); err != nil {
		t.Fatal(err)
	}
	late.Unlock(ctx)

	err := guardPut(t, early, store, "k") // control: the same cluster's older token
	if !errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrTokenRegressed) {
		t.Fatalf("a stale token of the same cluster: got %v, want ErrStale alone", err)
	}

	srv := etcdlocktest.New(t) // the new cluster
	fresh := newLocker(t, etcdClient(t, srv.Endpoints()...))
	l := mustLock(t, fresh, "b")
	defer l.Unlock(ctx)
	if l.Token() >= late.Token() {
		t.Fatalf("new cluster's token %d, old %d: want lower (the test needs it)", l.Token(), late.Token())
	}
	err = guardPut(t, l, store, "k")
	if !errors.Is(err, fence.ErrStale) || !errors.Is(err, fence.ErrTokenRegressed) {
		t.Fatalf("the only holder on the new cluster: got %v, want ErrStale and ErrTokenRegressed", err)
	}
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Current != late.Token() {
		t.Fatalf("StaleError: got %+v, want Current %d", se, late.Token())
	}
	if rec, _ := store.Get(ctx, "k"); rec.Token != late.Token() {
		t.Fatalf("the refused write changed the record: %+v", rec)
	}
	t.Logf("refused: %v", err)
}

func guardPut(t *testing.T, l *etcdlock.Lock, s fence.Store, key string) error {
	t.Helper()
	g, err := fence.NewGuard(l)
	if err != nil {
		t.Fatal(err)
	}
	return g.Put(context.Background(), s, key, []byte(l.Name()))
}
