package etcdlock_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestNoSpaceSemaphoreUnlockSlotKeyOnEveryEtcd: the release under NOSPACE
// with its compare-only nested Txn (an operation with no operations) is
// accepted by every server version, and tells a deleted slot key from a
// held one, as on the embedded server (TestNoSpaceSemaphoreUnlockAfterSlotTaken).
func TestNoSpaceSemaphoreUnlockSlotKeyOnEveryEtcd(t *testing.T) {
	forEachEtcd(t, func(t *testing.T, cli *clientv3.Client) {
		p := prefix(t)
		c := newLockerAt(t, cli, p, etcdlock.WithTTL(3*time.Second))
		sm := semaphore(t, c, "taken", 2)
		lost, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
		if err != nil {
			t.Fatal(err)
		}
		kept, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Delete(t.Context(), p+"sem/taken/p/"+strconv.Itoa(lost.Slot())); err != nil {
			t.Fatal(err)
		}
		defer raiseNoSpace(t, cli)()
		if err := lost.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Errorf("Unlock under NOSPACE after the slot key was deleted: got %v, want ErrKeyDeleted", err)
		}
		if err := kept.Unlock(t.Context()); err != nil || !errors.Is(kept.Err(), etcdlock.ErrUnlocked) {
			t.Errorf("Unlock under NOSPACE of a held permit: got %v (Err %v), want nil (ErrUnlocked)", err, kept.Err())
		}
		if ks := keys(t, cli, p+"sem/"); len(ks) > 0 {
			t.Errorf("keys left after both Unlocks: %v", ks)
		}
	})
}

// Under NOSPACE, a holder whose slot key was deleted and then claimed by a
// newer holder is told it lost the permit, and its release leaves the
// newer holder's slot key alone (the nested delete compares the value).
// Here C's queue key is deleted too, so that B, third in the queue, is
// entitled to a permit and claims A's free slot. The control, a release
// that deletes its slot's key whoever's it is, deletes B's.
func TestNoSpaceSemaphoreSlotReclaimed(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "compared", true: "control"}[control], func(t *testing.T) {
			if control {
				etcdlock.UnconditionalSlotReleaseForTest.Store(true)
				defer etcdlock.UnconditionalSlotReleaseForTest.Store(false)
			}
			if kept := noSpaceSlotReclaimed(t); kept == control {
				t.Errorf("B's slot key kept after A's release under NOSPACE: %v, want %v", kept, !control)
			}
		})
	}
}

// noSpaceSlotReclaimed runs TestNoSpaceSemaphoreSlotReclaimed's scenario
// and reports whether B's slot key was kept.
func noSpaceSlotReclaimed(t *testing.T) (kept bool) {
	eps := propServer(t)
	cli := etcdClient(t, eps...)
	p := prefix(t)
	sa := semaphore(t, newLocker(t, cli, etcdlock.WithTTL(5*time.Second)), "s", 2)
	sb := semaphore(t, newLocker(t, cli, etcdlock.WithTTL(5*time.Second)), "s", 2)
	a, err := sa.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	c, err := sa.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	slotKey := p + "sem/s/p/" + strconv.Itoa(a.Slot())
	if _, err := cli.Delete(t.Context(), slotKey); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(t.Context(), c.Key()); err != nil {
		t.Fatal(err)
	}
	b, err := sb.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	if b.Slot() != a.Slot() {
		t.Fatalf("B claimed slot %d, want A's %d", b.Slot(), a.Slot())
	}
	defer raiseNoSpace(t, cli)()
	if err := a.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Errorf("A's Unlock under NOSPACE, its slot claimed by B: got %v, want ErrKeyDeleted", err)
	}
	resp, err := cli.Get(t.Context(), slotKey)
	if err != nil {
		t.Fatal(err)
	}
	kept = len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == int64(b.Token())
	if err := b.Unlock(t.Context()); kept && (err != nil || !errors.Is(b.Err(), etcdlock.ErrUnlocked)) {
		t.Errorf("B's Unlock under NOSPACE: got %v (Err %v), want nil (ErrUnlocked)", err, b.Err())
	}
	return kept
}
