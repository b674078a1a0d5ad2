package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// A deposed holder's etcd write that arrives late, after its lock was
// broken and a newer holder wrote, is refused by Lock.Held in its If: the
// check and the write are one raft entry. The control (no Held) shows the
// late write landing over the newer holder's.
func TestHeldRefusesDeposedHoldersLateTxn(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		name := "fenced"
		if !fenced {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			direct := etcdClient(t)
			fcli, in := faulty(t, 1)
			a := newLocker(t, fcli, etcdlock.WithTTL(5*time.Second))
			b := newLocker(t, direct)
			la := mustLock(t, a, "x")
			key := prefix(t) + "data/config"

			held := in.Hold(puts(key))
			sent := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				defer cancel()
				txn := fcli.Txn(ctx)
				if fenced {
					txn = txn.If(la.Held())
				}
				_, err := txn.Then(clientv3.OpPut(key, "A")).Commit()
				sent <- err
			}()
			<-held.Caught()
			<-sent // A gave up waiting; its request is still on its way

			if _, err := b.Break(t.Context(), "x", la.Token()); err != nil {
				t.Fatal(err)
			}
			lb := mustLock(t, b, "x")
			defer lb.Unlock(t.Context())
			resp, err := direct.Txn(t.Context()).If(lb.Held()).Then(clientv3.OpPut(key, "B")).Commit()
			if err != nil || !resp.Succeeded {
				t.Fatalf("the new holder's write: %v, succeeded %v", err, resp != nil && resp.Succeeded)
			}
			if err := held.Release(t.Context()); err != nil {
				t.Fatalf("delivering A's late write: %v", err)
			}
			got, err := direct.Get(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			want := "B"
			if !fenced {
				want = "A" // the control: the stale write landed
			}
			if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != want {
				t.Errorf("after A's late write: got %v, want %q", got.Kvs, want)
			}
			if fenced && got.Kvs[0].ModRevision != resp.Header.Revision {
				t.Errorf("the key moved after the new holder's write (mod revision %d, written at %d)", got.Kvs[0].ModRevision, resp.Header.Revision)
			}
		})
	}
}

// Held never holds once the lock has ended, and holds for a Term too.
func TestHeldAfterUnlockAndForTerm(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	l := mustLock(t, c, "x")
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Txn(t.Context()).If(l.Held()).Commit()
	if err != nil || resp.Succeeded {
		t.Errorf("Held after Unlock: succeeded %v, %v; want false", resp != nil && resp.Succeeded, err)
	}
	term, err := c.Campaign(t.Context(), "e", "v")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(t.Context())
	resp, err = cli.Txn(t.Context()).If(term.Held()).Commit()
	if err != nil || !resp.Succeeded {
		t.Errorf("Held while leading: succeeded %v, %v; want true", resp != nil && resp.Succeeded, err)
	}
}
