package etcdlock

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// secondKey is an acquisition's hold on a key other than its queue key, for
// a kind whose row in kindTable makes one (a semaphore's permit slot,
// permit.go). Such an acquisition queues as any other; it claims its second
// key once its turn has come, or in the read that finds it come (an
// optimistic claim, given back when the turn had not come), and the key's
// create revision is then its token
// and whose existence its hold (ticket.holdKey). The engine asks it at the
// points of the protocol below (see PROTOCOL.md) and tells it only what a
// turn and a secondCalls carry; a ticket without one has a nil secondKey
// and none of this happens.
type secondKey interface {
	// read returns the operations the engine sends after its own in each
	// read of the queue (the create's and the waiter's), and saw is given
	// their answers, the revision they were read at, and whether the read
	// found more blockers queued before ours than the kind's need; neither
	// sends a request. They read what claim will need, so that its first pass
	// sends no read of its own; with tn (a waiter's read after the
	// deletion of one of its blockers), they also claim the key,
	// optimistically: the read's own count of the blockers says whether
	// the turn had come (see claim and notYet). Each such claim is
	// decisive: once it is answered, no copy of it or of an earlier claim
	// can land.
	read(tn *turn) []clientv3.Op
	saw(rs []*pb.ResponseOp, rev int64, more bool)
	// check fails when kvs, keys of the queue, say that their callers
	// disagree with this one (a semaphore's permits).
	check(kvs []*mvccpb.KeyValue) error
	// holder completes e, the entry of a holder read with the queue (with
	// read), with its second key's slot and token when it has claimed one.
	holder(e Entry) Entry
	// notYet gives back, after a read that found the turn not come, every
	// key the read showed ours (an optimistic claim that landed). It sends
	// a request only when there is one.
	notYet(ctx context.Context, tn turn, e secondCalls) error
	// claim takes the second key for the acquisition whose turn tn has
	// come (at revision tn.at), with the engine's calls e, and returns its
	// create revision: the token. It sends nothing when an optimistic
	// claim landed in the read that found the turn come. It fails with a
	// *LockedError when tn does not wait and no key is free. Each request
	// it sends is safe to arrive late or twice.
	claim(ctx context.Context, tn turn, e secondCalls) (int64, error)
	// claimed returns the key claim took and its create revision; "" and 0
	// before it has.
	claimed() (key string, token int64)
	// release returns the operations that delete, in a release's
	// transaction, every second key a claim may have put, each only if it
	// is still ours.
	release() []clientv3.Op
}

// newSecondKey makes a kind's second key (kindInfo.second) for an
// acquisition of the name called name in the key space keys, whose callers
// agree on agreed (spot.agreed), under the Client's controls ctl.
type newSecondKey func(keys layout, name string, agreed int, ctl controls) secondKey

// turn is what a second key is told of its acquisition, queued.
type turn struct {
	key string // its queue key
	rev int64  // the queue key's create revision
	// at is the revision of a read that found the turn come (0 before):
	// the turn, once come, stays (no key is created before ours later), so
	// a claim that landed at or after it was made in turn.
	at    int64
	lease clientv3.LeaseID // its session's lease
	wait  bool             // it waits for a key (Acquire), or gives up (TryAcquire)
	// record is the queue key's record, naming slot (a claim rewrites the
	// queue key with it).
	record func(slot int) string
}

// secondCalls are the engine's requests a second key's claim makes.
type secondCalls struct {
	// txn starts a transaction.
	txn func(ctx context.Context) clientv3.Txn
	// waitRange waits until a key under prefix dir is deleted after
	// revision from, or the watch ends, and then pauses (a pause that
	// doubles with each call, from 10 ms to 1 s); it fails when ctx or the
	// session ends.
	waitRange func(ctx context.Context, dir string, from int64) error
	// waitGone waits until one of kvs (keys as read) is deleted, watching
	// them from the current revision and reading them again once the
	// watches are in place, so that a deletion just before is not missed
	// (see waitDeleted), with no pause after a deletion; it pauses as
	// waitRange does after a watch that ended early, and fails when ctx or
	// the session ends.
	waitGone func(ctx context.Context, kvs []*mvccpb.KeyValue) error
	// lost is the error of an acquisition whose queue key was found gone.
	lost func() error
	// again is called after a request failed with err: nil once the
	// pause after a failure that passes (codes.Unavailable, as
	// readPredecessors retries) is waited out, for a request that is
	// safe to send again; else the error to give up with.
	again func(ctx context.Context, err error) error
}
