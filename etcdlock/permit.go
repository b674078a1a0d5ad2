package etcdlock

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// permit is a semaphore acquisition's claim on one of its permits, the
// engine's secondKey for kindSemaphore (see kindTable). A claim puts a
// slot's key, on the session's lease, with the holder's id as its value,
// while the slot's key does not exist and our queue key is as created and
// as last read (its mod revision, qmod); it rewrites our queue key's
// record (with the slot) in the same transaction. Every write of ours to
// the queue key moves its mod revision, so that of the claims sent with
// one qmod at most one lands, and none once we have read another: a copy
// of a claim, or of a claim of another slot, can never land after one has,
// nor after our key is deleted.
//
// The claim is optimistic when it rides on the read that follows the
// deletion of one of the waiter's blockers (optimistic): that read counts
// the blockers in the same transaction, and a claim that landed while they
// say the turn has not come is given back (giveBack), compared with the
// claim's own revision. A claim is kept only when it landed at or after a
// revision at which the turn had come (turn.at). Every release deletes, in
// its transaction, the keys of the slots tried whose value is still ours.
// PROTOCOL.md, step 5, has the whole argument.
type permit struct {
	// No mutex: written only by its acquisition's goroutine (read, saw,
	// notYet, claim), and only read once the acquisition has returned.
	name    string // the semaphore's
	permits int    // the semaphore's, as this caller gives them
	// unconditional: a release deletes every slot key tried, whoever's it
	// is now; unconditionalGiveBack: a give-back deletes the slot's key
	// whoever's it is now (the controls of the request-fault tests)
	unconditional, unconditionalGiveBack bool
	noGiveBackRetry                      bool         // a give-back is not sent again (the control of TestSemaphoreGiveBackLostReplyKeepsPlace)
	noClaimRetry                         bool         // a failed claim ends the acquisition (the control of TestSemaphoreClaimLostReplyAcquires)
	dir                                  string       // the prefix of the slots' keys
	id                                   string       // a slot key's value while ours; set once our key is created
	tried                                map[int]bool // slots whose claim was sent and may have landed
	qmod                                 int64        // our queue key's mod revision as last known; 0: its create revision
	slot                                 int          // the slot held, once claimed
	token                                int64        // the slot key's create revision, once claimed (0 before)
	// The slots' keys read by the last read of the queue, at seenRev;
	// fresh until claim has used them. more: that read found more
	// blockers queued before ours than permits.
	seen        []*mvccpb.KeyValue
	seenRev     int64
	fresh, more bool
}

// newPermit is kindSemaphore's secondKey (see kindTable): the permit an
// acquisition of the semaphore name, of permits, claims once its turn has come.
func newPermit(p layout, name string, permits int, ctl controls) secondKey {
	return &permit{name: name, permits: permits, unconditional: ctl.unconditionalSlotRelease,
		unconditionalGiveBack: ctl.unconditionalGiveBack, noGiveBackRetry: ctl.noGiveBackRetry,
		noClaimRetry: ctl.noClaimRetry, dir: p.semPermits(name), tried: map[int]bool{}}
}

// read is a read of the slots' keys, sent with each read of the queue, so
// that the claim that may follow needs no read of its own; with tn, when
// the turn is likely to have come (see likely), an optimistic claim before
// it and a read of our queue key after it.
func (p *permit) read(tn *turn) []clientv3.Op {
	slots := clientv3.OpGet(p.dir, clientv3.WithPrefix())
	if tn == nil || !p.likely() {
		return []clientv3.Op{slots}
	}
	cands := p.candidates(*tn)
	if len(cands) == 0 {
		return []clientv3.Op{slots}
	}
	return []clientv3.Op{p.optimistic(*tn, cands), slots, clientv3.OpGet(tn.key, clientv3.WithKeysOnly())}
}

// likely reports whether a deletion among the nearest blockers is likely
// to have given us the turn: always with one permit (the blocker deleted
// is the one before ours, whose deletion gives the turn unless it gave up
// waiting), and with more when the last read counted exactly permits
// blockers (the deletion of any gives the turn). Otherwise the deletion
// of a holder often wakes waiters whose turn has not come, and their
// claims would take the slot it freed from the waiter whose turn has.
func (p *permit) likely() bool { return p.permits == 1 || !p.more }

// saw keeps the slots' keys a read (see read) returned at revision rev,
// whether it found more blockers before ours than permits, and our queue
// key's mod revision when it read it.
func (p *permit) saw(rs []*pb.ResponseOp, rev int64, more bool) {
	if len(rs) == 3 { // an optimistic claim's answer, the slots, our queue key
		if q := rs[2].GetResponseRange().Kvs; len(q) > 0 {
			p.qmod = q[0].ModRevision
		}
		rs = rs[1:2]
	}
	p.seen, p.seenRev, p.fresh, p.more = rs[0].GetResponseRange().Kvs, rev, true, more
}

// optimistic is the claim sent with the read that follows the deletion of
// one of the waiter's blockers, nested in the read's transaction (which
// compares our queue key's create revision): a chain of claims of the
// candidate slots cands (see candidates), each tried when the one before cannot
// land, and at the end, when none can, a rewrite of our queue key's
// record, still only at the mod revision the claims compared (the seal).
// Either way our key's mod revision moves, and no copy of it, or of an
// earlier claim, can land once it has been answered.
func (p *permit) optimistic(tn turn, cands []int) clientv3.Op {
	p.identify(tn)
	atMod := clientv3.Compare(clientv3.ModRevision(tn.key), "=", p.modOf(tn))
	op := clientv3.OpTxn([]clientv3.Cmp{atMod}, []clientv3.Op{clientv3.OpPut(tn.key, tn.record(-1), clientv3.WithIgnoreLease())}, nil)
	for i := len(cands) - 1; i >= 0; i-- {
		p.tried[cands[i]] = true
		op = clientv3.OpTxn([]clientv3.Cmp{atMod, clientv3.Compare(clientv3.CreateRevision(permitKey(p.dir, cands[i])), "=", 0)},
			p.claimOps(tn, cands[i]), []clientv3.Op{op})
	}
	return op
}

// maxCandidates bounds the slots an optimistic claim tries.
const maxCandidates = 8

// candidates are the slots an optimistic claim tries, in order: those free
// in the last read, from our own start (see start); then those held by
// holders queued before us, nearest first, the likeliest to have just been
// released. At most maxCandidates.
func (p *permit) candidates(tn turn) []int {
	holders := map[int]int64{} // slot -> the create revision of its holder's queue key
	for _, kv := range p.seen {
		var v permitValue
		if slot, ok := permitOf(p.dir, string(kv.Key)); ok && json.Unmarshal(kv.Value, &v) == nil {
			holders[slot] = v.Rev
		}
	}
	var free, held []int
	for i := range p.permits {
		slot := (p.start(tn) + i) % p.permits
		if rev, ok := holders[slot]; !ok {
			free = append(free, slot)
		} else if rev < tn.rev {
			held = append(held, slot)
		}
		if len(free) == maxCandidates {
			break
		}
	}
	slices.SortStableFunc(held, func(a, b int) int { return cmp.Compare(holders[b], holders[a]) })
	cands := append(free, held...)
	return cands[:min(len(cands), maxCandidates)]
}

// start is the slot our search for a free one starts at: by our key's
// create revision, not 0, because waiters given their turn by the same
// releases read the same free slots, and if all chose the lowest, all but
// one claim would be refused and read again.
func (p *permit) start(tn turn) int { return int(tn.rev % int64(p.permits)) }

// modOf is our queue key's mod revision as last known.
func (p *permit) modOf(tn turn) int64 {
	if p.qmod == 0 {
		return tn.rev
	}
	return p.qmod
}

// identify sets our id, a slot key's value while ours.
func (p *permit) identify(tn turn) {
	if p.id == "" {
		id, _ := json.Marshal(permitValue{Key: tn.key, Rev: tn.rev, Permits: p.permits})
		p.id = string(id)
	}
}

// claimOps put slot's key, ours, and our queue key's record naming it.
func (p *permit) claimOps(tn turn, slot int) []clientv3.Op {
	return []clientv3.Op{clientv3.OpPut(permitKey(p.dir, slot), p.id, clientv3.WithLease(tn.lease)),
		clientv3.OpPut(tn.key, tn.record(slot), clientv3.WithIgnoreLease())}
}

// claimed returns the key of the slot claimed, and its token; "" and 0
// before the claim.
func (p *permit) claimed() (string, int64) {
	if p.token == 0 {
		return "", 0
	}
	return permitKey(p.dir, p.slot), p.token
}

// release returns the deletions of every slot's key that a claim of ours
// may have put, each while its value is still ours.
func (p *permit) release() []clientv3.Op {
	var ops []clientv3.Op
	for slot := range p.tried {
		k := permitKey(p.dir, slot)
		cmp := clientv3.Compare(clientv3.Value(k), "=", p.id)
		if p.unconditional {
			cmp = clientv3.Compare(clientv3.CreateRevision(k), "!=", 0)
		}
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{cmp}, []clientv3.Op{clientv3.OpDelete(k)}, nil))
	}
	return ops
}

// check fails when one of kvs, keys of the semaphore's queue, says it has
// other permits than p.
func (p *permit) check(kvs []*mvccpb.KeyValue) error {
	for _, kv := range kvs {
		if n := recordOf(kv.Value).Permits; n != 0 && n != p.permits {
			return fmt.Errorf("etcdlock: semaphore %q: %w: %d asked, %s says %d", p.name, ErrPermits, p.permits, kv.Key, n)
		}
	}
	return nil
}

// holder returns e, a queue key's entry, with the slot and the permit's
// token (the one its holder fences with) when the slots read with the
// queue show it holds one.
func (p *permit) holder(e Entry) Entry {
	for _, kv := range p.seen {
		var v permitValue
		slot, ok := permitOf(p.dir, string(kv.Key))
		if ok && json.Unmarshal(kv.Value, &v) == nil && v.Key == e.Key && v.Rev == int64(e.Token) {
			e.Slot, e.Token = slot, fence.Token(kv.CreateRevision)
		}
	}
	return e
}
