package etcdlock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Every member of the cluster moves to a new address, one at a time
// through the membership API (MemberRemove, a learner on new ports,
// MemberPromote), while two clients hold a lock each. The one whose etcd
// client syncs its endpoints (AutoSyncInterval) follows the members: its
// lock stays held with its key and token throughout, and at the end, when
// no address it started with answers, it unlocks and locks again with a
// higher token. The control, a client without the sync, loses its lock
// (Done closes, Err says why) once the last address it knew is gone.
func TestLockFollowsMovedMembers(t *testing.T) {
	testenv.Long(t, "a multi-member cluster whose members are replaced")
	cluster := embedetcd.New(t, 3)
	start := cluster.Endpoints()
	dial := func(autoSync time.Duration) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: start, AutoSyncInterval: autoSync,
			DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	ctx := t.Context()
	syncing := dial(200 * time.Millisecond)
	following := newLocker(t, syncing, etcdlock.WithTTL(4*time.Second))
	control := newLocker(t, dial(0), etcdlock.WithTTL(4*time.Second))
	held, err := following.Lock(ctx, "moved")
	if err != nil {
		t.Fatal(err)
	}
	lost, err := control.Lock(ctx, "moved-control")
	if err != nil {
		t.Fatal(err)
	}

	for i := range cluster.Members {
		mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := cluster.Move(mctx, i)
		cancel()
		if err != nil {
			t.Fatalf("move member %d: %v", i, err)
		}
		// As an operator moves one member at a time, the next once the
		// clients know the last one's address: a move takes 0.2 s, and
		// three in a row can leave a client that syncs every 200 ms with
		// no address that works.
		poll.Until(t, fmt.Sprintf("the syncing client knows member %d's new address", i), func() bool {
			return slices.Contains(syncing.Endpoints(), cluster.Members[i].ClientURL)
		})
		select {
		case <-held.Done():
			t.Fatalf("after member %d moved: the syncing client's lock ended: %v", i, held.Err())
		default:
		}
	}
	for i, ep := range start {
		for _, now := range cluster.Endpoints() {
			if ep == now {
				t.Fatalf("member %d still at %s", i, ep)
			}
		}
	}

	// The control knows only the old addresses: its session cannot renew,
	// and its lock ends within the TTL.
	select {
	case <-lost.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the control's lock did not end within 15 s of its last address going")
	}
	t.Logf("control: lock ended: %v", lost.Err())

	// The syncing client's lock is still its key, on the moved cluster.
	admin := etcdClient(t, cluster.Endpoints()...)
	resp, err := admin.Get(ctx, held.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != int64(held.Token()) {
		t.Fatalf("the held lock's key %s on the moved cluster: got %v, %v; want created at %d", held.Key(), resp, err, held.Token())
	}
	select {
	case <-held.Done():
		t.Fatalf("the syncing client's lock ended: %v", held.Err())
	default:
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on the moved cluster: %v", err)
	}
	again, err := following.Lock(ctx, "moved")
	if err != nil {
		t.Fatalf("Lock again on the moved cluster: %v", err)
	}
	if again.Token() <= held.Token() {
		t.Fatalf("token after the moves %d, want above %d", again.Token(), held.Token())
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
