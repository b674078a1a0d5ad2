package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// More requests that lose their reply or arrive twice: the waiter's read of
// its predecessor, the lease revoke of Close, and the lease lookup that
// tells why a watched key went.

// predecessorReads matches a waiter's read of its predecessor: a
// transaction that compares a key's create revision and reads the newest
// key below it.
func predecessorReads(method string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok || len(txn.Compare) != 1 || len(txn.Success) != 1 {
		return false
	}
	r := txn.Success[0].GetRequestRange()
	return txn.Compare[0].Target == pb.Compare_CREATE && r != nil && r.MaxCreateRevision > 0
}

// A waiter whose read of its predecessor loses its reply (or is answered
// twice) keeps its place and is granted the lock once the holder unlocks:
// the read changes nothing and is read again.
func TestPredecessorReadFaultKeepsPlace(t *testing.T) {
	for _, k := range []reqfault.Kind{reqfault.LostReply, reqfault.Twice} {
		t.Run(k.String(), func(t *testing.T) {
			direct := etcdClient(t)
			fcli, in := faulty(t, 31)
			holder := newLocker(t, direct)
			waiter := newLocker(t, fcli)
			h := mustLock(t, holder, "pred")
			in.Next(predecessorReads, k)
			got := make(chan *etcdlock.Lock, 1)
			errs := make(chan error, 1)
			go func() {
				l, err := waiter.Lock(t.Context(), "pred")
				if err != nil {
					errs <- err
					return
				}
				got <- l
			}()
			waitQueued(t, direct, h, 2)
			if err := h.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errs:
				t.Fatalf("waiter's Lock: %v", err)
			case l := <-got:
				if l.Token() <= h.Token() {
					t.Fatalf("waiter's token %d not above the holder's %d", l.Token(), h.Token())
				}
				if n := in.Counts()[k]; n != 1 {
					t.Fatalf("%d faults injected, want 1 (the predecessor read)", n)
				}
				if err := l.Unlock(t.Context()); err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("waiter not granted 5s after the holder's Unlock")
			}
		})
	}
}

// Close whose lease revoke lands but loses its reply: Close returns (an
// error or nil, at once), the lease is gone, and so are the keys, without
// waiting for the TTL.
func TestCloseRevokeLostReply(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 32)
	c, err := etcdlock.New(fcli, etcdlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, c, "revoke")
	in.Next(reqfault.Method("Lease/LeaseRevoke"), reqfault.LostReply)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err = c.Close(ctx)
	t.Logf("Close: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if in.Counts()[reqfault.LostReply] != 1 {
		t.Fatal("the revoke's reply was not lost")
	}
	if !errors.Is(l.Err(), etcdlock.ErrClosed) {
		t.Fatalf("Err: got %v, want ErrClosed", l.Err())
	}
	ttl, err := direct.TimeToLive(t.Context(), l.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL != -1 {
		t.Fatalf("lease TTL after Close: %d, want -1 (revoked)", ttl.TTL)
	}
	if resp, err := direct.Get(t.Context(), l.Key()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key after Close: %v %v, want none", resp, err)
	}
}

// A watched key deleted while the lookup of the lease (which tells a
// deletion by someone else from the lease's expiry) loses its reply: the
// lock still ends, as lost, and the Client's next lock works.
func TestDeletedCauseLeaseLookupLostReply(t *testing.T) {
	t.Run("deleted", func(t *testing.T) {
		fcli, in := faulty(t, 33)
		c := newLocker(t, fcli)
		admin := newLocker(t, etcdClient(t))
		l := mustLock(t, c, "ttl-lost")
		poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
		in.Next(reqfault.Method("Lease/LeaseTimeToLive"), reqfault.LostReply)
		if _, err := admin.Break(t.Context(), l.Name(), l.Token()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 5*time.Second, "Done after Break")
		if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
		}
		if in.Counts()[reqfault.LostReply] != 1 {
			t.Fatal("the lease lookup's reply was not lost")
		}
	})
	t.Run("revoked", func(t *testing.T) {
		fcli, in := faulty(t, 34)
		direct := etcdClient(t)
		c := newLocker(t, fcli)
		l := mustLock(t, c, "ttl-lost-revoked")
		poll.Until(t, "the watch", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == 1 && ok })
		in.Next(reqfault.Method("Lease/LeaseTimeToLive"), reqfault.LostReply)
		if _, err := direct.Revoke(t.Context(), l.Lease()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 5*time.Second, "Done after the lease's revoke")
		if err := l.Err(); !errors.Is(err, etcdlock.ErrLost) {
			t.Fatalf("Err: got %v, want ErrLost", err)
		}
		t.Logf("cause with the lease lookup lost: %v", l.Err())
		next := mustLock(t, c, "ttl-lost-revoked")
		if next.Lease() == l.Lease() {
			t.Fatal("the next lock is on the revoked lease")
		}
		if err := next.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
