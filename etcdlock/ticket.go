package etcdlock

import (
	"context"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An acquisition's request (spot) and its place in a queue (ticket): what
// the engine's steps (acquire.go, wait.go, release.go, lock.go) share, and
// what a kind asks for.

// spot is what an acquisition asks for: a place in the queue q (its kind's,
// kindInfo.queue) of the name called name, with data in its key's record.
type spot struct {
	kind          kind
	name, q, data string
	wait          bool // wait for the turn (Lock, Campaign) or give up (TryLock)
	noWatch       bool // hold without watching the key (WithoutKeyWatch)
	// limit is how many hold at once (see need): a semaphore's permits;
	// 0 (one) for the rest.
	limit int
	// agreed is the number every caller of the name must give, written in
	// its key's record (the record's Permits) for the kind to check: a
	// semaphore's permits, a group's partitions; 0 (none) for the rest.
	agreed int
	// bound bounds each request of the acquisition (the session's grant,
	// the create, the reads of the queue) and each release of it, on top
	// of ctx (0: ctx alone): a request that has not returned by then fails
	// with context.DeadlineExceeded, and the caller may try again at once,
	// every request being safe to arrive late or twice. A group's worker
	// sets it (Group.bound); the wait for the turn, between requests, is
	// not bounded by it, nor is a second key's claim (kindInfo.second: no
	// kind that sets bound has one).
	bound time.Duration
}

// request bounds one request of sp's acquisition (see spot.bound).
func (sp spot) request(ctx context.Context) (context.Context, context.CancelFunc) {
	if sp.bound <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, sp.bound)
}

// cleanupTimeout bounds a release of sp's acquisition: the Client's
// cleanup timeout, or sp's bound when that is shorter.
func (c *Client) cleanupTimeout(sp spot) time.Duration {
	if sp.bound > 0 {
		return min(c.o.cleanupTimeout, sp.bound)
	}
	return c.o.cleanupTimeout
}

// need is how many of its blockers queued before it keep an acquisition
// waiting: its limit, or one.
func (sp spot) need() int { return max(1, sp.limit) }

// ended is what Err says after a release: ErrUnlocked, or ErrResigned for
// a term.
func (sp spot) ended() error { return kindTable[sp.kind].ended }

// ticket is one attempt's place in a queue: the key and marker of one of
// the session's lanes (see lanes), and the marker's mod revision when the
// lane was taken.
type ticket struct {
	spot
	key    string
	marker markerKey
	lane   int
	mark   int64
	rev    int64     // the key's create revision, once the create landed
	second secondKey // its kind's second key (kindInfo.second); nil for most kinds
	at     time.Time // when the key was first written, for its record
	queued bool      // the create landed, and we know it: a loss from now on is of our place
	// unmarked: released without moving the marker (etcd out of space), set
	// before that delete is sent; cleared once the marker is known moved.
	unmarked atomic.Bool
	// noSpaceSent: a release without the marker write was sent and its
	// outcome is unknown (its reply lost): a key found gone since may be
	// its doing, and no marker tells (see ticket.gone).
	noSpaceSent atomic.Bool
	ctl         controls // the Client's (see controls)
}

func (c *Client) ticket(s *session, sp spot) *ticket {
	lane, mark := s.lanes.take()
	t := &ticket{
		spot: sp, lane: lane, mark: mark,
		key:    queueKey(sp.q, kindTable[sp.kind].reader, s.hex, lane),
		marker: c.keys().marker(s.hex, lane),
		ctl:    c.o.ctl,
	}
	if mk := kindTable[sp.kind].second; mk != nil {
		t.second = mk(c.keys(), sp.name, sp.agreed, c.o.ctl)
	}
	return t
}

// blockers returns a read, narrowed by opts (at most three), of the keys of
// t's queue that must be gone before t holds: every key for a writer (and
// a candidate), the writers' for a reader.
func (t *ticket) blockers(opts ...clientv3.OpOption) clientv3.Op {
	end := clientv3.WithPrefix()
	if kindTable[t.kind].reader || t.ctl.writersIgnoreReaders { // the control skips the readers, the only keys from readersFrom(q) on
		end = clientv3.WithRange(readersFrom(t.q))
	}
	var all [4]clientv3.OpOption // on the stack, unlike append(opts, end)
	return clientv3.OpGet(t.q, append(append(all[:0], opts...), end)...)
}

// entitled returns how many of kvs, the keys of a queue in arrival order,
// hold it now or are entitled to (their turn has come; a claim, or the
// news of it, may be pending): a key is when fewer than need of its
// blockers (see blockers: every key, or for a reader's key the writers')
// come before it. It is the rule a waiter waits on (waitTurn), applied to
// a whole queue for those who read one rather than wait in it: Inspect,
// Break and InspectSemaphore (Observe's leader is an election's one
// entitled key, its oldest, which it finds in one pass). Those keys are the first
// of kvs: a key that is not entitled has a blocker of every key after it
// before it.
func entitled(kvs []*mvccpb.KeyValue, need int) int {
	writers := 0
	for i, kv := range kvs {
		reader := isReaderKey(string(kv.Key))
		before := i // its blockers before it
		if reader {
			before = writers
		}
		if before >= need {
			return i
		}
		if !reader {
			writers++
		}
	}
	return len(kvs)
}

// readSecond adds t's second key's reads (see secondKey.read; with an
// optimistic claim when tn is not nil) to ops, and returns where their
// answers will begin among the transaction's responses: -1 without one.
func (t *ticket) readSecond(ops []clientv3.Op, tn *turn) ([]clientv3.Op, int) {
	if t.second == nil {
		return ops, -1
	}
	return append(ops, t.second.read(tn)...), len(ops)
}

// sawSecond gives t's second key its answers in resp, a read made with
// readSecond whose answers begin at at, whose read of the blockers is at
// blockers (limited to the need nearest before ours, or with ours to
// need+1: its More says whether there were more).
func (t *ticket) sawSecond(resp *clientv3.TxnResponse, at, blockers int) {
	if t.second != nil && at >= 0 {
		t.second.saw(resp.Responses[at:], resp.Header.Revision, resp.Responses[blockers].GetResponseRange().More)
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

// moved records that a release of t's use moved the marker to rev.
func (t *ticket) moved(rev int64) {
	t.mark = rev
	t.unmarked.Store(false)
}

// releaseMark is the marker write of a release of t's use that deletes its
// queue key, created at rev: markOurs(rev), and markGone(rev) when t holds
// by a second key that is no longer the one it claimed. Such a hold is its
// second key, not its queue key: when someone deleted the second key
// (etcdctl del), another acquisition may have held it since, and the
// release must say the hold was lost (see secondTaken), as it does for a
// lock whose key was deleted. etcd evaluates a transaction's nested
// compares before any of its operations, so the deletion of the second key
// in the same transaction does not change the answer.
func (t *ticket) releaseMark(s *session, rev int64) clientv3.Op {
	held, ok := t.secondHeld()
	if !ok {
		return t.marker.put(s, markOurs(rev))
	}
	return clientv3.OpTxn([]clientv3.Cmp{held}, []clientv3.Op{t.marker.put(s, markOurs(rev))}, []clientv3.Op{t.marker.put(s, markGone(rev))})
}
