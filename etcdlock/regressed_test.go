package etcdlock_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
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

// TestSnapshotRestore restores etcd from a snapshot taken before the
// resource's highest token, as an operator would (etcdutl snapshot restore
// on etcd 3.6): without a revision bump the next holder is refused with
// ErrStale and ErrTokenRegressed, and fencelock's advice holds: restored
// with --bump-revision (and --mark-compacted), the next holder's tokens
// pass the resource's again and its write lands.
//
//	go test -run TestSnapshotRestore ./etcdlock  # needs etcd-3.6 and etcdutl-3.6 (bash .ci/setup.sh)
func TestSnapshotRestore(t *testing.T) {
	testenv.Long(t, "it restores a snapshot into a new member")
	t.Parallel()
	server, err1 := otheretcd.Find("etcd-3.6")
	etcdutl, err2 := otheretcd.Find("etcdutl-3.6")
	if err := errors.Join(err1, err2); err != nil {
		testenv.Unavailable(t, err.Error(), "bash .ci/setup.sh builds etcd-3.6 and etcdutl-3.6 (.ci/install-etcd.sh)")
	}
	ctx := t.Context()
	srv := otheretcd.Start(t, server, "3.6", filepath.Join(t.TempDir(), "data"))
	cli := etcdClient(t, srv.Endpoint)
	c := newLocker(t, cli)
	mustLock(t, c, "warmup").Unlock(ctx)
	snap := filepath.Join(t.TempDir(), "snap.db")
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	f.Close()
	store := fence.NewMemoryStore()
	for range 20 { // the resource goes on past the snapshot
		l := mustLock(t, c, "job")
		if err := guardPut(t, l, store, "k"); err != nil {
			t.Fatal(err)
		}
		l.Unlock(ctx)
	}
	floor, _ := store.Get(ctx, "k")
	c.Close(ctx)
	srv.Stop()

	// The restored member's peer URL is not the one it will listen on: a
	// single member never dials it.
	restore := func(t *testing.T, args ...string) *clientv3.Client {
		dir := filepath.Join(t.TempDir(), "restored")
		out, err := exec.Command(etcdutl, append([]string{"snapshot", "restore", snap, "--data-dir", dir, "--name", "other",
			"--initial-cluster", "other=http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("etcdutl snapshot restore %v: %v\n%s", args, err, out)
		}
		return etcdClient(t, otheretcd.Start(t, server, "3.6", dir).Endpoint)
	}
	t.Run("no bump", func(t *testing.T) {
		l := mustLock(t, newLocker(t, restore(t)), "job")
		defer l.Unlock(ctx)
		err := guardPut(t, l, store, "k")
		if !errors.Is(err, fence.ErrStale) || !errors.Is(err, fence.ErrTokenRegressed) {
			t.Fatalf("after a restore without a bump: token %d against %d: got %v, want ErrStale and ErrTokenRegressed", l.Token(), floor.Token, err)
		}
	})
	t.Run("bumped", func(t *testing.T) {
		l := mustLock(t, newLocker(t, restore(t, "--bump-revision", "1000000", "--mark-compacted")), "job")
		defer l.Unlock(ctx)
		if err := guardPut(t, l, store, "k"); err != nil || l.Token() <= floor.Token {
			t.Fatalf("after a restore with a bump: token %d against %d: %v, want the write accepted", l.Token(), floor.Token, err)
		}
	})
}
