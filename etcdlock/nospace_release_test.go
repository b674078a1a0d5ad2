package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// noSpaceRelease matches the release etcdlock sends under NOSPACE: a Txn
// that deletes key and puts nothing (not the release with the marker,
// which etcd refuses first).
func noSpaceRelease(key string) reqfault.Match {
	return func(method string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		return ok && !putsAny(txn) && deletes(key)(method, req)
	}
}

func putsAny(txn *pb.TxnRequest) bool {
	for _, op := range append(txn.Success, txn.Failure...) {
		if op.GetRequestPut() != nil || (op.GetRequestTxn() != nil && putsAny(op.GetRequestTxn())) {
			return true
		}
	}
	return false
}

// TestNoSpaceSemaphoreUnlockSlotKeyOnEveryEtcd: the release under NOSPACE
// with its compare-only nested Txn (an operation with no operations) is
// accepted by every server version, and tells a deleted slot key from a
// held one, as on the embedded server (TestNoSpaceSemaphoreUnlockAfterSlotTaken).
func TestNoSpaceSemaphoreUnlockSlotKeyOnEveryEtcd(t *testing.T) {
	testenv.Long(t, "other etcd versions")
	t.Parallel()
	forEachEtcd(t, func(t *testing.T, cli *clientv3.Client) {
		p := prefix(t)
		noSpaceSlotTaken(t, newLockerAt(t, cli, p, etcdlock.WithTTL(3*time.Second)), cli, p)
	})
}

// Under NOSPACE, a semaphore's Unlock still tells a holder whose slot key
// someone deleted (etcdctl del) that it had lost the permit, as it does
// with space to write (TestSemaphoreUnlockAfterSlotTaken); its release
// without the marker write compared only its queue key, still there, and
// said the permit was held throughout. The control, a holder whose slot
// is its own, is told so.
func TestNoSpaceSemaphoreUnlockAfterSlotTaken(t *testing.T) {
	cli := etcdClient(t, propServer(t)...)
	noSpaceSlotTaken(t, newLocker(t, cli), cli, prefix(t))
}

// noSpaceSlotTaken takes two permits of a semaphore of c (prefix p),
// deletes the slot key of one through admin, raises NOSPACE, and checks
// that Unlock tells the one it was lost and the other that it was not,
// leaving no key.
func noSpaceSlotTaken(t *testing.T, c *etcdlock.Client, admin *clientv3.Client, p string) {
	t.Helper()
	sm := semaphore(t, c, "taken", 2)
	lost, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	kept, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(t.Context(), etcdlock.KeysUnder(p).Permit("taken", lost.Slot())); err != nil {
		t.Fatal(err)
	}
	defer raiseNoSpace(t, admin)()
	if err := lost.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Errorf("Unlock under NOSPACE after the slot key was deleted: got %v, want ErrKeyDeleted", err)
	}
	if err := kept.Unlock(t.Context()); err != nil || !errors.Is(kept.Err(), etcdlock.ErrUnlocked) {
		t.Errorf("Unlock under NOSPACE of a held permit: got %v (Err %v), want nil (ErrUnlocked)", err, kept.Err())
	}
	if ks := keys(t, admin, etcdlock.KeysUnder(p).Semaphores()); len(ks) > 0 {
		t.Errorf("keys left after both Unlocks: %v", ks)
	}
}

// A release under NOSPACE whose reply is lost is retried in the
// background, and finds the key gone: deleted by that release, or by
// someone else before it, which etcd keeps no trace to tell (the marker
// write that tells it is refused). The retry said for certain "deleted by
// someone else"; it now says so as a possibility (ErrKeyDeleted, the safe
// side, and fence.ErrUnknownOutcome).
func TestNoSpaceUnlockLostReply(t *testing.T) {
	for _, kind := range []string{"lock", "semaphore"} {
		for _, cleared := range []bool{false, true} {
			t.Run(kind+map[bool]string{false: "", true: "/cleared"}[cleared], func(t *testing.T) {
				eps := propServer(t)
				direct := etcdClient(t, eps...)
				fcli, in := faulty(t, 31, eps...)
				c := newLocker(t, fcli, etcdlock.WithTTL(5*time.Second), etcdlock.WithCleanupTimeout(300*time.Millisecond))
				var l *etcdlock.Lock
				var err error
				if kind == "lock" {
					l, err = c.Lock(t.Context(), "n", etcdlock.WithoutKeyWatch())
				} else {
					l, err = semaphore(t, c, "n", 2).Acquire(t.Context(), etcdlock.WithoutKeyWatch())
				}
				if err != nil {
					t.Fatal(err)
				}
				disarm := raiseNoSpace(t, direct)
				defer disarm()
				in.Next(noSpaceRelease(l.Key()), reqfault.LostReply)
				var n atomic.Int32
				if cleared { // the alarm is cleared before the background retry's first release
					in.Before(deletes(l.Key()), func(req any) {
						if putsAny(req.(*pb.TxnRequest)) && n.Add(1) == 2 {
							disarm()
						}
					})
				}
				err = l.Unlock(t.Context())
				t.Logf("Unlock with its NOSPACE release's reply lost: %v", err)
				select {
				case <-l.Done():
				case <-time.After(5 * time.Second):
					t.Fatalf("Done not closed 5s after Unlock (Err %v)", l.Err())
				}
				// Nothing in etcd tells our deletion from another's: the loss is
				// reported (the safe side) as one that may not be.
				for what, err := range map[string]error{"Err": l.Err(), "Unlock again": l.Unlock(t.Context())} {
					if !errors.Is(err, etcdlock.ErrKeyDeleted) || !errors.Is(err, fence.ErrUnknownOutcome) {
						t.Errorf("%s after our own release deleted the key (its reply lost): got %v, want ErrKeyDeleted and fence.ErrUnknownOutcome", what, err)
					}
				}
				if cleared && n.Load() < 2 {
					t.Errorf("the background retry's release was not seen (%d releases with the marker)", n.Load())
				}
				disarm() // the name is free for others once there is space to take it
				other := newLocker(t, direct)
				if kind == "lock" {
					_, err = other.TryLock(t.Context(), "n")
				} else if _, err = semaphore(t, other, "n", 2).TryAcquire(t.Context()); err == nil {
					_, err = semaphore(t, other, "n", 2).TryAcquire(t.Context()) // both permits: none stuck
				}
				if err != nil {
					t.Errorf("another client's TryLock once the alarm is cleared: %v", err)
				}
			})
		}
	}
	// The control: a key deleted by someone else, no reply lost, is lost
	// for certain.
	t.Run("deleted", func(t *testing.T) {
		cli := etcdClient(t, propServer(t)...)
		l := mustLock(t, newLocker(t, cli, etcdlock.WithTTL(5*time.Second)), "n")
		if _, err := cli.Delete(t.Context(), l.Key()); err != nil {
			t.Fatal(err)
		}
		defer raiseNoSpace(t, cli)()
		if err := l.Unlock(t.Context()); !errors.Is(err, etcdlock.ErrKeyDeleted) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Errorf("Unlock under NOSPACE of a key someone else deleted: got %v, want ErrKeyDeleted and not fence.ErrUnknownOutcome", err)
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
			var ctl []etcdlock.Option
			if control {
				ctl = append(ctl, etcdlock.UnconditionalSlotReleaseForTest())
			}
			if kept := noSpaceSlotReclaimed(t, ctl...); kept == control {
				t.Errorf("B's slot key kept after A's release under NOSPACE: %v, want %v", kept, !control)
			}
		})
	}
}

// noSpaceSlotReclaimed runs TestNoSpaceSemaphoreSlotReclaimed's scenario
// and reports whether B's slot key was kept.
func noSpaceSlotReclaimed(t *testing.T, ctl ...etcdlock.Option) (kept bool) {
	eps := propServer(t)
	cli := etcdClient(t, eps...)
	p := prefix(t)
	sa := semaphore(t, newLocker(t, cli, append([]etcdlock.Option{etcdlock.WithTTL(5 * time.Second)}, ctl...)...), "s", 2)
	sb := semaphore(t, newLocker(t, cli, append([]etcdlock.Option{etcdlock.WithTTL(5 * time.Second)}, ctl...)...), "s", 2)
	a, err := sa.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	c, err := sa.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
	if err != nil {
		t.Fatal(err)
	}
	slotKey := etcdlock.KeysUnder(p).Permit("s", a.Slot())
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

// With authentication on and the locker's role granted its prefix only,
// a semaphore's release under NOSPACE (its nested compare of the slot
// key) is allowed, and still tells a deleted slot key from a held one.
func TestNoSpaceSemaphoreUnlockWithAuth(t *testing.T) {
	p := prefix(t)
	s := secureEtcd(t, time.Minute, false, p)
	root := s.client(t, clientv3.Config{Username: "root", Password: rootPassword}, true)
	noSpaceSlotTaken(t, newLockerAt(t, s.locker(t, nil), p, etcdlock.WithTTL(5*time.Second)), root, p)
}

// A semaphore permit's release under NOSPACE that arrives late (held past
// its caller's giving up, the release then retried in the background) or
// again (a copy of the applied request, delivered once the alarm is
// cleared) after the same Client has taken the permit anew, on the same
// session and perhaps the same lane and key names, changes nothing: it
// compares the old queue key's create revision and the old permit's slot
// value. The new holder keeps its keys and its Unlock says it held
// throughout.
//
// The control reverts the release's compares: the old release then
// deletes the new holder's key.
func TestNoSpaceSemaphoreReleaseLateOrAgain(t *testing.T) {
	testenv.Long(t, "it fills etcd to its quota and waits out late releases")
	t.Parallel()
	for _, how := range []string{"late", "again", "control"} {
		t.Run(how, func(t *testing.T) {
			opts := []etcdlock.Option{etcdlock.WithTTL(5 * time.Second), etcdlock.WithCleanupTimeout(300 * time.Millisecond)}
			if how == "control" {
				opts = append(opts, etcdlock.UnconditionalReleaseForTest(), etcdlock.UnconditionalSlotReleaseForTest())
			}
			eps := propServer(t)
			direct := etcdClient(t, eps...)
			fcli, in := faulty(t, 57, eps...)
			c := newLocker(t, fcli, opts...)
			sm := semaphore(t, c, "n", 1)
			old, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
			if err != nil {
				t.Fatal(err)
			}
			disarm := raiseNoSpace(t, direct)
			var held *reqfault.Held
			var copied atomic.Pointer[pb.TxnRequest]
			if how != "again" {
				held = in.Hold(noSpaceRelease(old.Key()))
			} else {
				in.Before(noSpaceRelease(old.Key()), func(req any) {
					copied.CompareAndSwap(nil, proto.Clone(req.(*pb.TxnRequest)).(*pb.TxnRequest))
				})
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			err = old.Unlock(ctx)
			cancel()
			t.Logf("Unlock under NOSPACE (%s): %v", how, err)
			select {
			case <-old.Done(): // released, by this Unlock or its background retry
			case <-time.After(10 * time.Second):
				t.Fatalf("the old permit not released 10s after Unlock (Err %v)", old.Err())
			}
			disarm()
			// The permit anew, on the old one's session lane (and so its
			// key's name) once the background cleanup has freed it.
			var cur *etcdlock.Lock
			poll.Until(t, "the permit anew under the old key's name", func() bool {
				l, err := sm.Acquire(t.Context(), etcdlock.WithoutKeyWatch())
				if err != nil {
					t.Fatalf("the permit anew: %v", err)
				}
				if l.Key() == old.Key() {
					cur = l
					return true
				}
				return l.Unlock(t.Context()) != nil
			})
			if how != "again" {
				if err := held.Release(t.Context()); err != nil {
					t.Fatalf("the late release: %v", err)
				}
			} else {
				req := copied.Load()
				if req == nil {
					t.Fatal("no release under NOSPACE was sent")
				}
				resp, err := pb.NewKVClient(direct.ActiveConnection()).Txn(t.Context(), req)
				if err != nil || resp.Succeeded {
					t.Fatalf("the old release again: succeeded %v, error %v; want refused", resp.GetSucceeded(), err)
				}
			}
			ks := keys(t, direct, keysOf(t).Semaphore("n"))
			if how == "control" {
				if len(ks) == 2 {
					t.Errorf("control: the old release without its compares left the new holder's keys %v; want them deleted", ks)
				}
				return
			}
			if len(ks) != 2 {
				t.Errorf("keys after the old release arrived: %v, want the new holder's queue and slot keys", ks)
			}
			if err := cur.Unlock(t.Context()); err != nil {
				t.Errorf("the new holder's Unlock: %v, want nil (held throughout)", err)
			}
		})
	}
}
