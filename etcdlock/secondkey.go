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
// points of the protocol below (see PROTOCOL.md) and knows nothing else of
// the kind; a ticket without one has a nil secondKey and none of this
// happens.
type secondKey interface {
	// read adds, to ops that read the queue, the reads claim will need,
	// so that its first pass sends none of its own; saw is given the
	// answer. Neither sends a request.
	read(ops []clientv3.Op) []clientv3.Op
	saw(resp *clientv3.TxnResponse)
	// check fails when kvs, keys of the queue, say that their callers
	// disagree with this one (a semaphore's permits).
	check(kvs []*mvccpb.KeyValue) error
	// holder completes e, the entry of a holder read with the queue (with
	// read), with its second key's slot and token when it has claimed one.
	holder(e Entry) Entry
	// claim takes the second key for t, whose queue key was created at rev
	// and whose turn has come, and returns its create revision: the
	// token. It fails with a *LockedError when t does not wait and no key
	// is free. Each request it sends is safe to arrive late or twice.
	claim(ctx context.Context, c *Client, s *session, t *ticket, rev int64) (int64, error)
	// claimed returns the key claim took and its create revision; "" and 0
	// before it has.
	claimed() (key string, token int64)
	// release returns the operations that delete, in a release's
	// transaction, every second key a claim of t's may have put, each
	// only if it is still ours.
	release() []clientv3.Op
}

// readSecond adds t's second key's reads (see secondKey.read) to ops.
func (t *ticket) readSecond(ops []clientv3.Op) []clientv3.Op {
	if t.second == nil {
		return ops
	}
	return t.second.read(ops)
}

// sawSecond gives t's second key the answer to a read made with readSecond.
func (t *ticket) sawSecond(resp *clientv3.TxnResponse) {
	if t.second != nil {
		t.second.saw(resp)
	}
}

// holdKey is the key whose existence, with the Lock's token as its create
// revision, is t's hold: its second key once claimed, else its queue key.
func (t *ticket) holdKey() string {
	if t.second != nil {
		if k, _ := t.second.claimed(); k != "" {
			return k
		}
	}
	return t.key
}

// releaseSecond is the deletion of t's second keys in a release (see
// secondKey.release); nil without one.
func (t *ticket) releaseSecond() []clientv3.Op {
	if t.second == nil {
		return nil
	}
	return t.second.release()
}

// secondHeld is the compare that t's claimed second key is still the one
// it claimed, and false when t has claimed none (or has no second key).
func (t *ticket) secondHeld() (clientv3.Cmp, bool) {
	if t.second == nil {
		return clientv3.Cmp{}, false
	}
	k, token := t.second.claimed()
	if k == "" {
		return clientv3.Cmp{}, false
	}
	return clientv3.Compare(clientv3.CreateRevision(k), "=", token), true
}

// secondStillHeld is releaseMark's question without its writes, for a
// release while etcd is out of space (see releaseNoSpace), which refuses
// every put: whether t's claimed second key is still the one it claimed.
// Without one it asks nothing (no operation).
func (t *ticket) secondStillHeld() []clientv3.Op {
	held, ok := t.secondHeld()
	if !ok {
		return nil
	}
	return []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{held}, nil, nil)}
}

// secondTaken reports whether a release's response, whose first operation
// was releaseMark's or secondStillHeld's, says the second key had been
// deleted (false when the first was neither: a delete's response).
func secondTaken(resp *clientv3.TxnResponse) bool {
	n := resp.Responses[0].GetResponseTxn()
	return n != nil && !n.Succeeded
}
