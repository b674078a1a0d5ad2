package etcdlock_test

// The library against every etcd server version users run: Debian's
// etcd-server package (3.4), and 3.5 and 3.6 built from their own Go
// modules by .ci/install-etcd.sh; the embedded server (3.7) serves every
// other test.

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// forEachEtcd runs f against a server of every version (see otheretcd).
func forEachEtcd(t *testing.T, f func(t *testing.T, cli *clientv3.Client)) {
	otheretcd.ForEach(t, func(t *testing.T, ep string) { f(t, etcdClient(t, ep)) })
}

// TestKindsOnEveryEtcd takes every kind of lock on every server version:
// a lock and its TryLock, a read/write lock, a semaphore (its claims,
// optimistic ones in a read of the queue, and its releases use nested
// transactions), LockAll, an election with Proclaim
// and Observe, and a holder's own fenced Txn (Held).
//
//	go test -run TestKindsOnEveryEtcd ./etcdlock
func TestKindsOnEveryEtcd(t *testing.T) {
	testenv.Long(t, "other etcd versions")
	t.Parallel()
	forEachEtcd(t, func(t *testing.T, cli *clientv3.Client) {
		p := prefix(t)
		a := newLockerAt(t, cli, p, etcdlock.WithTTL(3*time.Second))
		b := newLockerAt(t, etcdClient(t, cli.Endpoints()...), p, etcdlock.WithTTL(3*time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()

		l := mustLock(t, a, "lock")
		if _, err := b.TryLock(ctx, "lock"); !errors.Is(err, etcdlock.ErrLocked) {
			t.Errorf("TryLock of a held lock: got %v, want ErrLocked", err)
		}
		resp, err := cli.Txn(ctx).If(l.Held()).Then(clientv3.OpPut(p+"data", "1")).Commit()
		if err != nil || !resp.Succeeded {
			t.Errorf("the holder's Held Txn: %v %v, want it applied", resp, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if resp, err = cli.Txn(ctx).If(l.Held()).Then(clientv3.OpPut(p+"data", "2")).Commit(); err != nil || resp.Succeeded {
			t.Errorf("a released holder's Held Txn: %v %v, want it refused", resp, err)
		}

		r1, err := a.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := b.RLock(ctx, "rw")
		if err != nil {
			t.Fatalf("a second reader: %v", err)
		}
		if _, err := b.TryLock(ctx, "rw"); !errors.Is(err, etcdlock.ErrLocked) {
			t.Errorf("a writer beside readers: got %v, want ErrLocked", err)
		}
		r1.Unlock(ctx)
		r2.Unlock(ctx)
		w, err := b.TryLock(ctx, "rw")
		if err != nil || w.Token() <= r2.Token() {
			t.Fatalf("the writer after the readers: %v (token %v)", err, w)
		}
		w.Unlock(ctx)

		sa, _ := a.Semaphore("sem", 2)
		sb, _ := b.Semaphore("sem", 2)
		p1, err := sa.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := sb.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.TryAcquire(ctx); !errors.Is(err, etcdlock.ErrLocked) {
			t.Errorf("a third permit of two: got %v, want ErrLocked", err)
		}
		third := acquireAsync(ctx, sb) // waits, and claims in the read that finds its turn (nested transactions)
		poll.Until(t, "the third acquisition queued", func() bool { return len(keys(t, cli, etcdlock.KeysUnder(p).SemaphoreQueue("sem"))) == 3 })
		p1.Unlock(ctx)
		a3 := <-third
		p3, err := a3.l, a3.err
		if err != nil || p3.Slot() != p1.Slot() || p3.Token() <= p1.Token() {
			t.Fatalf("the freed permit: %v, slot %d token %d after slot %d token %d", err, p3.Slot(), p3.Token(), p1.Slot(), p1.Token())
		}
		p2.Unlock(ctx)
		p3.Unlock(ctx)

		m, err := a.LockAll(ctx, []string{"x", "y"})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		o := observe(t, ctx, b, "e")
		term, err := a.Campaign(ctx, "e", "v1")
		if err != nil {
			t.Fatal(err)
		}
		if err := term.Proclaim(ctx, "v2"); err != nil {
			t.Fatal(err)
		}
		o.waitSeen(t, []fence.Token{term.Token()}, "the leader")
		if e, err := b.Leader(ctx, "e"); err != nil || e.Data != "v2" {
			t.Errorf("Leader: %+v %v, want the proclaimed value", e, err)
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		k := etcdlock.KeysUnder(p)
		for _, under := range []string{k.Locks(), k.Semaphores(), k.Elections()} { // the sessions' lane markers stay while they live
			if ks := keys(t, cli, under); len(ks) != 0 {
				t.Errorf("keys left: %v", ks)
			}
		}
	})
}
