package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
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

// collision is a semaphore of one permit whose next in turn, E, has its
// read with the claim held back, while W, queued two places behind it, is
// woken by X between them giving up: W's claim takes the free slot before
// its turn, and its give-back is held back. Each test lets the two go in
// its own order.
type collision struct {
	direct      *clientv3.Client
	slot        string
	ein, win    *reqfault.Injector
	eGot, wGot  <-chan acquired
	letE, letW  func()
	claimReq    atomic.Pointer[pb.TxnRequest] // W's optimistic claim
	giveBackReq atomic.Pointer[pb.TxnRequest] // W's give-back
}

// newCollision sets a collision up, W's Client with wopts, and returns
// once W's give-back has been caught.
func newCollision(t *testing.T, wopts ...etcdlock.Option) *collision {
	c := &collision{direct: etcdClient(t), slot: keysOf(t).Permit("n", 0)}
	h, err := semaphore(t, newLocker(t, c.direct), "n", 1).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ecli, ein := faulty(t, 1)
	c.ein = ein
	c.eGot = acquireAsync(t.Context(), semaphore(t, newLocker(t, ecli), "n", 1))
	waitSemQueued(t, c.direct, "n", 2)
	xctx, xcancel := context.WithCancel(t.Context())
	xGot := acquireAsync(xctx, semaphore(t, newLocker(t, c.direct), "n", 1))
	waitSemQueued(t, c.direct, "n", 3)
	wcli, win := faulty(t, 2)
	c.win = win
	c.wGot = acquireAsync(t.Context(), semaphore(t, newLocker(t, wcli, wopts...), "n", 1))
	waitSemQueued(t, c.direct, "n", 4)

	eCaught, wCaught := make(chan struct{}), make(chan struct{})
	c.letE, c.letW = holdFirst(ein, optimisticClaims, eCaught, nil), holdFirst(win, giveBacks(keysOf(t).Permits("n")), wCaught, &c.giveBackReq)
	win.Before(optimisticClaims, func(req any) { c.claimReq.CompareAndSwap(nil, proto.Clone(req.(*pb.TxnRequest)).(*pb.TxnRequest)) })
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-eCaught // E's turn has come; its read with the claim is held back
	xcancel()
	if a := <-xGot; a.err == nil {
		t.Fatal("X acquired with E before it")
	}
	<-wCaught // W's claim landed before its turn; its give-back is held back
	return c
}

// holdFirst holds back the first request in matches until the returned
// func is called, closing caught when it is caught, and keeps a copy of it
// in req (if not nil).
func holdFirst(in *reqfault.Injector, m reqfault.Match, caught chan struct{}, req *atomic.Pointer[pb.TxnRequest]) func() {
	let := make(chan struct{})
	var once atomic.Bool
	in.BeforeContext(m, func(ctx context.Context, r any) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		if req != nil {
			req.Store(proto.Clone(r.(*pb.TxnRequest)).(*pb.TxnRequest))
		}
		close(caught)
		select {
		case <-let:
		case <-ctx.Done():
		}
	})
	return sync.OnceFunc(func() { close(let) })
}

// TestSemaphoreGiveBackTwiceSparesNextHolder has a waiter claim the one
// slot optimistically before its turn (see collision), give it back
// (Inspect lists it as a waiter meanwhile), and the next in turn claim it.
// The optimistic claim and the give-back are delivered again: neither may
// touch the new holder's slot: the claim, delivered again while the slot
// is free, must not take it; the give-back, delivered again once the next
// holder has it, must not delete it. The control's give-back deletes the
// slot's key whoever's it is (UnconditionalGiveBackForTest), and must
// delete the holder's.
func TestSemaphoreGiveBackTwiceSparesNextHolder(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "control"}[control], func(t *testing.T) {
			var wopts []etcdlock.Option
			if control {
				wopts = append(wopts, etcdlock.UnconditionalGiveBackForTest())
			}
			c := newCollision(t, wopts...)
			defer c.letE()
			defer c.letW()
			q, err := semaphore(t, newLocker(t, c.direct), "n", 1).Inspect(t.Context())
			if err != nil || len(q.Holders) != 1 || q.Holders[0].Slot != -1 || len(q.Waiters) != 1 || q.Waiters[0].Slot != -1 {
				t.Fatalf("Inspect while W's claim is given back: holders %+v, waiters %+v, %v; want E entitled, W waiting, neither with a slot", q.Holders, q.Waiters, err)
			}
			c.letW()
			poll.Until(t, "W's give-back", func() bool { return len(keys(t, c.direct, c.slot)) == 0 })
			// The slot is free: W's claim, delivered again, must not land.
			kv := pb.NewKVClient(c.direct.ActiveConnection())
			if _, err := kv.Txn(t.Context(), c.claimReq.Load()); err != nil {
				t.Fatalf("W's optimistic claim again: %v", err)
			}
			if ks := keys(t, c.direct, c.slot); len(ks) != 0 {
				t.Fatalf("W's optimistic claim, delivered again after its give-back, took the slot: %v", ks)
			}
			c.letE()
			e := <-c.eGot
			if e.err != nil {
				t.Fatal(e.err)
			}
			defer e.l.Unlock(t.Context())
			if _, err := kv.Txn(t.Context(), c.giveBackReq.Load()); err != nil {
				t.Fatalf("W's give-back again: %v", err)
			}
			resp, err := c.direct.Get(t.Context(), c.slot)
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
			case w := <-c.wGot:
				t.Fatalf("W acquired while E holds: %v, %v", w.l, w.err)
			default:
			}
			if err := e.l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			w := <-c.wGot
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

// TestSemaphoreTurnWaitsOutOptimisticClaim lets E, whose turn has come,
// read while W's claim, made before its turn, still holds the one slot
// (see collision): E must watch that slot's key from the current revision
// and read it again (permit.waitFree; a watch of the slots from E's read
// would be caught up only at etcd's next sync of lagging watches), and
// take the slot once W gives it back.
func TestSemaphoreTurnWaitsOutOptimisticClaim(t *testing.T) {
	t.Parallel()
	c := newCollision(t)
	defer c.letW()
	ranges := c.ein.Calls("KV/Range")
	c.letE()
	poll.Until(t, "E's read of the slot's key once its watch is in place", func() bool { return c.ein.Calls("KV/Range") > ranges })
	select {
	case e := <-c.eGot:
		t.Fatalf("E acquired while W's claim holds the slot: %v, %v", e.l, e.err)
	default:
	}
	c.letW()
	e := <-c.eGot
	if e.err != nil {
		t.Fatal(e.err)
	}
	defer e.l.Unlock(t.Context())
	if resp, err := c.direct.Get(t.Context(), c.slot); err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != int64(e.l.Token()) {
		t.Fatalf("the slot after W gave it back: %v %v, want E's, created at its token %d", resp, err, e.l.Token())
	}
}

// TestBreakSemaphoreSparesClaimBeforeTurn has an operator break the slot
// key a waiter claimed before its turn (see collision), by its create
// revision, while the waiter's give-back is held back: that is no permit
// (InspectSemaphore lists the waiter among the Waiters, with no slot), so
// BreakSemaphore fails with ErrNotHolder and deletes nothing, rather than
// look the waiter up among the holders and index past them (a panic).
func TestBreakSemaphoreSparesClaimBeforeTurn(t *testing.T) {
	t.Parallel()
	c := newCollision(t)
	defer c.letE()
	defer c.letW()
	resp, err := c.direct.Get(t.Context(), c.slot)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("W's claim of the slot: %v, %v", resp, err)
	}
	claim := resp.Kvs[0]
	if _, err := newLocker(t, c.direct).BreakSemaphore(t.Context(), "n", fence.Token(claim.CreateRevision)); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Errorf("BreakSemaphore of W's claim before its turn: %v, want ErrNotHolder", err)
	}
	if resp, err := c.direct.Get(t.Context(), c.slot); err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != claim.CreateRevision {
		t.Fatalf("W's claim after the BreakSemaphore: %v, %v; want it untouched", resp, err)
	}
	waitSemQueued(t, c.direct, "n", 2) // E's and W's queue keys, both kept
	c.letW()
	c.letE()
	e := <-c.eGot
	if e.err != nil {
		t.Fatal(e.err)
	}
	defer e.l.Unlock(t.Context())
}

// TestSemaphoreGiveBackLostReplyKeepsPlace loses the reply of the
// give-back of a waiter's claim made before its turn (see collision), as a
// leader change does (codes.Unavailable): the waiter sends it again, as it
// reads the queue again, and keeps its place, taking the slot after the
// next in turn. The control, WithoutGiveBackRetryForTest, gives up
// waiting with the error.
func TestSemaphoreGiveBackLostReplyKeepsPlace(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "control"}[control], func(t *testing.T) {
			var wopts []etcdlock.Option
			if control {
				wopts = append(wopts, etcdlock.WithoutGiveBackRetryForTest())
			}
			c := newCollision(t, wopts...)
			defer c.letE()
			defer c.letW()
			c.win.Next(giveBacks(keysOf(t).Permits("n")), reqfault.LostReply)
			c.letW()
			c.letE()
			e := <-c.eGot
			if e.err != nil {
				t.Fatal(e.err)
			}
			if control {
				defer e.l.Unlock(t.Context())
				if w := <-c.wGot; w.err == nil {
					w.l.Unlock(t.Context())
					t.Fatal("control: W acquired after its give-back's reply was lost; want it to give up")
				}
				return
			}
			select {
			case w := <-c.wGot:
				t.Fatalf("W's Acquire returned while E holds: %v, %v", w.l, w.err)
			default:
			}
			if err := e.l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			w := <-c.wGot
			if w.err != nil {
				t.Fatalf("W, whose give-back's reply was lost: %v; want it to keep its place and acquire", w.err)
			}
			defer w.l.Unlock(t.Context())
			if w.l.Token() <= e.l.Token() {
				t.Errorf("W's token %d after E's %d: want greater", w.l.Token(), e.l.Token())
			}
		})
	}
}

// slotClaims matches a semaphore's claims after the turn (permit.claimSlot):
// transactions that put a slot's key under dir at their top level.
func slotClaims(dir string) func(string, any) bool {
	return func(_ string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok {
			return false
		}
		for _, op := range txn.Success {
			if p := op.GetRequestPut(); p != nil && strings.HasPrefix(string(p.Key), dir) {
				return true
			}
		}
		return false
	}
}

// TestSemaphoreClaimLostReplyAcquires loses the reply of a semaphore's
// claim after its turn, as a leader change does (codes.Unavailable; the
// claim landed): the acquisition reads again, as it does after a read
// that failed so, finds the slot its own and acquires, with the slot's
// token. The control, WithoutClaimRetryForTest, gives up with the error.
func TestSemaphoreClaimLostReplyAcquires(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "control"}[control], func(t *testing.T) {
			var opts []etcdlock.Option
			if control {
				opts = append(opts, etcdlock.WithoutClaimRetryForTest())
			}
			cli, in := faulty(t, 3)
			in.Next(slotClaims(keysOf(t).Permits("n")), reqfault.LostReply)
			l, err := semaphore(t, newLocker(t, cli, opts...), "n", 1).Acquire(t.Context())
			if n := in.Counts()[reqfault.LostReply]; n != 1 {
				t.Fatalf("lost replies: got %d, want 1 (the acquisition sent no claim after its turn)", n)
			}
			if control {
				if err == nil {
					l.Unlock(t.Context())
					t.Fatal("control: acquired after its claim's reply was lost; want it to give up")
				}
				return
			}
			if err != nil {
				t.Fatalf("Acquire, its claim's reply lost: %v; want it to read again and acquire", err)
			}
			defer l.Unlock(t.Context())
			resp, err := etcdClient(t).Get(t.Context(), keysOf(t).Permits("n"), clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 1 || fence.Token(resp.Kvs[0].CreateRevision) != l.Token() {
				t.Fatalf("slots' keys %v: want one, created at the token %d", resp.Kvs, l.Token())
			}
		})
	}
}
