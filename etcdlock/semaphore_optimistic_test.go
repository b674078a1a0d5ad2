package etcdlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// Tests of a semaphore's optimistic claim (PROTOCOL.md, step 5): the read
// that follows a blocker's deletion claims a slot in the same transaction,
// and gives it back when that read says the turn has not come.

// optimisticClaims matches the reads of a semaphore's queue that carry an
// optimistic claim: a transaction with a nested one.
func optimisticClaims(_ string, req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if op.GetRequestTxn() != nil {
			return true
		}
	}
	return false
}

// giveBacks matches a semaphore's give-backs: transactions that delete a
// slot's key under dir (a release deletes slots' keys in nested
// transactions only).
func giveBacks(dir string) func(string, any) bool {
	return func(_ string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok {
			return false
		}
		for _, op := range txn.Success {
			if d := op.GetRequestDeleteRange(); d != nil && strings.HasPrefix(string(d.Key), dir) {
				return true
			}
		}
		return false
	}
}

// acquired is an Acquire's outcome.
type acquired struct {
	l   *etcdlock.Lock
	err error
}

// acquireAsync starts sm.Acquire(ctx) and returns where its outcome will be.
func acquireAsync(ctx context.Context, sm *etcdlock.Semaphore) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := sm.Acquire(ctx)
		ch <- acquired{l, err}
	}()
	return ch
}

// waitSemQueued waits until semaphore name's queue has n keys.
func waitSemQueued(t *testing.T, direct *clientv3.Client, name string, n int) {
	t.Helper()
	poll.Until(t, "the queue's keys", func() bool { return len(keys(t, direct, keysOf(t).SemaphoreQueue(name))) == n })
}

// TestSemaphoreHandoffOneRequest checks that a waiter whose turn a release
// gives sends one request, its read of the queue with the claim, between
// that release and its Acquire returning: with one permit, and with two
// when it counted exactly two acquisitions before it.
func TestSemaphoreHandoffOneRequest(t *testing.T) {
	t.Parallel()
	for _, permits := range []int{1, 2} {
		t.Run(map[int]string{1: "one permit", 2: "two permits"}[permits], func(t *testing.T) {
			direct := etcdClient(t)
			var held []*etcdlock.Lock
			for range permits {
				l, err := semaphore(t, newLocker(t, direct), "n", permits).Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			fcli, in := faulty(t, 1)
			got := acquireAsync(t.Context(), semaphore(t, newLocker(t, fcli), "n", permits))
			// Queued, and the watches in place: its read of the blockers
			// once they are (wait.go, anyGone) is a Range for one, a Txn
			// for several.
			waitSemQueued(t, direct, "n", permits+1)
			poll.Until(t, "the waiter's watches in place", func() bool {
				return permits == 1 && in.Calls("KV/Range") > 0 || permits > 1 && in.Calls("KV/Txn") > 1
			})
			before := in.Calls("KV/Txn")
			if err := held[0].Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			a := <-got
			if a.err != nil {
				t.Fatal(a.err)
			}
			defer a.l.Unlock(t.Context())
			if n := in.Calls("KV/Txn") - before; n != 1 {
				t.Errorf("transactions from the release to Acquire's return: got %d, want 1 (the read with the claim)", n)
			}
			if a.l.Slot() != held[0].Slot() || a.l.Token() <= held[0].Token() {
				t.Errorf("the waiter's slot %d, token %d; want the freed slot %d with a token above %d", a.l.Slot(), a.l.Token(), held[0].Slot(), held[0].Token())
			}
		})
	}
}

// TestSemaphoreGiveBackTwiceSparesNextHolder has a waiter claim the one
// slot optimistically before its turn (the waiter before it gave up just
// as the holder released, while the next in turn's claim is held back),
// give it back (Inspect lists it as a waiter meanwhile), and the next in
// turn claim it. The optimistic claim and
// the give-back are delivered again: neither may touch the new
// holder's slot: the claim, delivered again while the slot is free, must
// not take it; the give-back, delivered again once the next holder has it,
// must not delete it. The control's give-back deletes the slot's key
// whoever's it is (UnconditionalGiveBackForTest), and must delete the
// holder's.
func TestSemaphoreGiveBackTwiceSparesNextHolder(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "control"}[control], func(t *testing.T) {
			direct := etcdClient(t)
			slot := keysOf(t).Permit("n", 0)
			h, err := semaphore(t, newLocker(t, direct), "n", 1).Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// E is next; X after it gives up; W, last, is woken by that.
			ecli, ein := faulty(t, 1)
			eGot := acquireAsync(t.Context(), semaphore(t, newLocker(t, ecli), "n", 1))
			waitSemQueued(t, direct, "n", 2)
			xctx, xcancel := context.WithCancel(t.Context())
			xGot := acquireAsync(xctx, semaphore(t, newLocker(t, direct), "n", 1))
			waitSemQueued(t, direct, "n", 3)
			var wopts []etcdlock.Option
			if control {
				wopts = append(wopts, etcdlock.UnconditionalGiveBackForTest())
			}
			wcli, win := faulty(t, 2)
			wGot := acquireAsync(t.Context(), semaphore(t, newLocker(t, wcli, wopts...), "n", 1))
			waitSemQueued(t, direct, "n", 4)

			caught, letGo := make(chan struct{}), make(chan struct{})
			var once atomic.Bool
			ein.BeforeContext(optimisticClaims, func(ctx context.Context, _ any) {
				if once.CompareAndSwap(false, true) {
					close(caught)
					select {
					case <-letGo:
					case <-ctx.Done():
					}
				}
			})
			var claimReq, giveBackReq atomic.Pointer[pb.TxnRequest]
			givingBack, inspected := make(chan struct{}), make(chan struct{})
			win.Before(optimisticClaims, func(req any) { claimReq.CompareAndSwap(nil, proto.Clone(req.(*pb.TxnRequest)).(*pb.TxnRequest)) })
			win.BeforeContext(giveBacks(keysOf(t).Permits("n")), func(ctx context.Context, req any) {
				if giveBackReq.CompareAndSwap(nil, proto.Clone(req.(*pb.TxnRequest)).(*pb.TxnRequest)) {
					close(givingBack)
					select {
					case <-inspected:
					case <-ctx.Done():
					}
				}
			})

			if err := h.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			<-caught // E's turn has come; its read with the claim is held back
			xcancel()
			if a := <-xGot; a.err == nil {
				t.Fatal("X acquired with E before it")
			}
			<-givingBack // W's claim landed before its turn; its give-back waits
			q, err := semaphore(t, newLocker(t, direct), "n", 1).Inspect(t.Context())
			if err != nil || len(q.Holders) != 1 || q.Holders[0].Slot != -1 || len(q.Waiters) != 1 || q.Waiters[0].Slot != -1 {
				t.Fatalf("Inspect while W's claim is given back: holders %+v, waiters %+v, %v; want E entitled, W waiting, neither with a slot", q.Holders, q.Waiters, err)
			}
			close(inspected)
			poll.Until(t, "W's give-back", func() bool { return len(keys(t, direct, slot)) == 0 })
			// The slot is free: W's claim, delivered again, must not land.
			kv := pb.NewKVClient(direct.ActiveConnection())
			if _, err := kv.Txn(t.Context(), claimReq.Load()); err != nil {
				t.Fatalf("W's optimistic claim again: %v", err)
			}
			if ks := keys(t, direct, slot); len(ks) != 0 {
				t.Fatalf("W's optimistic claim, delivered again after its give-back, took the slot: %v", ks)
			}
			close(letGo)
			e := <-eGot
			if e.err != nil {
				t.Fatal(e.err)
			}
			defer e.l.Unlock(t.Context())
			if _, err := kv.Txn(t.Context(), giveBackReq.Load()); err != nil {
				t.Fatalf("W's give-back again: %v", err)
			}
			resp, err := direct.Get(t.Context(), slot)
			if err != nil {
				t.Fatal(err)
			}
			intact := len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == int64(e.l.Token())
			if control {
				if intact {
					t.Error("control: the give-back without its compare, delivered again, left E's slot; want it deleted")
				}
				return
			}
			if !intact {
				t.Fatalf("E's slot after W's requests came again: %v, want its key created at E's token %d", resp.Kvs, e.l.Token())
			}
			select {
			case w := <-wGot:
				t.Fatalf("W acquired while E holds: %v, %v", w.l, w.err)
			default:
			}
			if err := e.l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			w := <-wGot
			if w.err != nil {
				t.Fatal(w.err)
			}
			defer w.l.Unlock(t.Context())
			if w.l.Token() <= e.l.Token() {
				t.Errorf("W's token %d after E's %d: want greater", w.l.Token(), e.l.Token())
			}
		})
	}
}
