package etcdlock

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// secondKey is an acquisition's hold on a key other than its queue key, for
// a kind whose row in kindTable makes one (a semaphore's permit slot,
// semaphore.go). Such an acquisition queues as any other; once its turn has
// come it claims its second key, whose create revision is then its token
// and whose existence its hold (ticket.holdKey). The engine asks it at the
// points of the protocol below (see PROTOCOL.md) and tells it only what a
// turn and a secondCalls carry; a ticket without one has a nil secondKey
// and none of this happens.
type secondKey interface {
	// read is a read that claim will need, which the engine sends with
	// each of its reads of the queue so that claim's first pass sends
	// none of its own; saw is given that read's range, and the revision
	// it was read at. Neither sends a request.
	read() clientv3.Op
	saw(kvs []*mvccpb.KeyValue, rev int64)
	// check fails when kvs, keys of the queue, say that their callers
	// disagree with this one (a semaphore's permits).
	check(kvs []*mvccpb.KeyValue) error
	// holder completes e, the entry of a holder read with the queue (with
	// read), with its second key's slot and token when it has claimed one.
	holder(e Entry) Entry
	// claim takes the second key for the acquisition whose turn t has
	// come, with the engine's calls e, and returns its create revision:
	// the token. It fails with a *LockedError when t does not wait and no
	// key is free. Each request it sends is safe to arrive late or twice.
	claim(ctx context.Context, t turn, e secondCalls) (int64, error)
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

// turn is what a second key's claim is told of the acquisition whose turn
// has come.
type turn struct {
	key   string           // its queue key
	rev   int64            // the queue key's create revision
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
	// lost is the error of an acquisition whose queue key was found gone.
	lost func() error
}
