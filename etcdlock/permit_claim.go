package etcdlock

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A permit's claims once the turn is known (permit.go has the permit and
// its optimistic claim): the claim after the turn, and the give-back of a
// claim made before it.

// notYet gives back every slot the last read showed ours, after a read
// that found the turn not come: an optimistic claim that landed in it, or
// an earlier one whose reply was lost.
func (p *permit) notYet(ctx context.Context, tn turn, e secondCalls) error {
	for _, kv := range p.seen {
		if p.id != "" && string(kv.Value) == p.id {
			if err := p.giveBack(ctx, tn, e, kv); err != nil {
				return err
			}
		}
	}
	return nil
}

// giveBack deletes kv, a slot's key a claim of ours created, only while
// its create revision is still our claim's, so that a copy of it
// delivered later never deletes a later claim of the slot, ours or
// another's; and rewrites our queue key's record (no slot) in the same
// transaction, only while our key is as created. It is sent again while
// it fails for a failure that passes (a leader change), as the waiter's
// reads of the queue are, so that the waiter keeps its place: a copy
// after one that landed finds the key gone, and reads our queue key.
func (p *permit) giveBack(ctx context.Context, tn turn, e secondCalls, kv *mvccpb.KeyValue) error {
	for {
		err := p.giveBackOnce(ctx, tn, e, kv)
		if err == nil || p.noGiveBackRetry {
			return err
		}
		if err := e.again(ctx, err); err != nil {
			return err
		}
	}
}

// giveBackOnce sends giveBack's transaction once.
func (p *permit) giveBackOnce(ctx context.Context, tn turn, e secondCalls, kv *mvccpb.KeyValue) error {
	k := string(kv.Key)
	ours := clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision)
	if p.unconditionalGiveBack {
		ours = clientv3.Compare(clientv3.CreateRevision(k), "!=", 0)
	}
	resp, err := e.txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(tn.key), "=", tn.rev), ours).
		Then(clientv3.OpDelete(k), clientv3.OpPut(tn.key, tn.record(-1), clientv3.WithIgnoreLease())).
		Else(clientv3.OpGet(tn.key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		p.qmod = resp.Header.Revision
		return nil
	}
	q := resp.Responses[0].GetResponseRange().Kvs
	if len(q) == 0 || q[0].CreateRevision != tn.rev {
		return e.lost()
	}
	p.qmod = q[0].ModRevision // someone else deleted the slot's key meanwhile
	return nil
}

// claim takes a free permit slot for the acquisition whose turn tn has
// come, and returns the slot's token: at once when an optimistic claim
// landed in the read that found the turn come. When every slot is taken
// (by a holder whose queue key someone deleted, by callers that disagree
// on the permits, or for a moment by a waiter's optimistic claim), it
// waits for one to be freed.
func (p *permit) claim(ctx context.Context, tn turn, e secondCalls) (int64, error) {
	p.identify(tn)
	for {
		// The first pass uses the slots read with the queue, in the
		// transaction that found our key alive and our turn come.
		slotKeys, readRev, err := p.slotsNow(ctx, tn, e)
		if err != nil {
			return 0, err
		}
		slots, err := p.sort(slotKeys, tn.rev)
		if err != nil {
			return 0, err
		}
		if done, err := p.ours(ctx, tn, e, slots.ours); done || err != nil {
			return p.token, err
		}
		if len(slots.ours) > 0 {
			continue // given back: read again
		}
		free := slots.free(p.start(tn), p.permits)
		if free < 0 && !tn.wait {
			// TryAcquire answers at once: every slot is held, by a holder
			// whose queue key someone deleted (it keeps its slot's key), or
			// by callers that disagree on the permits. Waiting here for a
			// slot would hold TryAcquire until its context ended.
			held := slots.held
			slices.SortFunc(held, func(a, b Entry) int { return cmp.Compare(a.Token, b.Token) }) // arrival order, not the keys'
			return 0, &LockedError{Name: p.name, Holder: held[0], Holders: held}
		}
		if free < 0 {
			if err := p.waitFree(ctx, e, slots, readRev); err != nil {
				return 0, err
			}
			continue
		}
		if won, err := p.claimSlot(ctx, tn, e, free); won || err != nil {
			return p.token, err
		}
		// Taken meanwhile, or a claim of ours landed, or our key is gone:
		// the next read tells.
	}
}

// slotsNow returns the slots' keys the last read of the queue returned,
// and its revision, once; after that, it reads them again, with our
// queue key: a lost error when that is gone.
func (p *permit) slotsNow(ctx context.Context, tn turn, e secondCalls) ([]*mvccpb.KeyValue, int64, error) {
	if p.fresh {
		p.fresh = false
		return p.seen, p.seenRev, nil
	}
	resp, err := e.txn(ctx).Then(clientv3.OpGet(p.dir, clientv3.WithPrefix()), clientv3.OpGet(tn.key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, 0, err
	}
	q := resp.Responses[1].GetResponseRange().Kvs
	if len(q) == 0 || q[0].CreateRevision != tn.rev {
		return nil, 0, e.lost()
	}
	p.qmod, p.seen, p.seenRev = q[0].ModRevision, resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision
	return p.seen, p.seenRev, nil
}

// slotsRead is the slots' keys of one read: those held by others (taken,
// their keys in others, with their holders' entries, for TryAcquire's
// answer; later: one of them is held by an acquisition queued after ours)
// and ours.
type slotsRead struct {
	taken  map[int]bool
	held   []Entry
	others []*mvccpb.KeyValue
	later  bool
	ours   []*mvccpb.KeyValue
}

// sort sorts kvs, the slots' keys of a read by the acquisition whose queue
// key was created at rev; it fails when a holder's permits are not ours.
func (p *permit) sort(kvs []*mvccpb.KeyValue, rev int64) (slotsRead, error) {
	sr := slotsRead{taken: map[int]bool{}}
	for _, kv := range kvs {
		slot, ok := permitOf(p.dir, string(kv.Key))
		if !ok {
			continue // not a slot's key
		}
		if string(kv.Value) == p.id {
			sr.ours = append(sr.ours, kv)
			continue
		}
		var v permitValue
		if json.Unmarshal(kv.Value, &v) == nil && v.Permits != p.permits {
			return sr, fmt.Errorf("etcdlock: semaphore %q: %w: %d asked, slot %d held with %d", p.name, ErrPermits, p.permits, slot, v.Permits)
		}
		sr.later = sr.later || v.Rev > rev
		sr.others = append(sr.others, kv)
		e := entryOf(kv)
		e.Slot = slot
		sr.held = append(sr.held, e)
		sr.taken[slot] = true
	}
	return sr, nil
}

// waitFree waits for a slot's key among sr, read at rev, to be deleted.
// A slot held by an acquisition queued after ours is most likely an
// optimistic claim made before its turn (with one permit it must be: ours
// has come), given back at once: then, with few permits, each slot's key
// is watched from the current revision, and read again, with no pause
// after a deletion (a watch of the slots from rev, which that give-back
// may already have passed, would be caught up only at etcd's next sync of
// lagging watches, up to 100 ms later).
func (p *permit) waitFree(ctx context.Context, e secondCalls, sr slotsRead, rev int64) error {
	if sr.later && p.permits <= maxCandidates {
		return e.waitGone(ctx, sr.others)
	}
	return e.waitRange(ctx, p.dir, rev+1)
}

// free is the first slot not taken, from start; -1 when all are.
func (sr slotsRead) free(start, permits int) int {
	for i := range permits {
		if slot := (start + i) % permits; !sr.taken[slot] {
			return slot
		}
	}
	return -1
}

// ours keeps a slot of ours that a claim made in turn (at or after tn.at,
// when the turn had come: it never goes again) and reports it done; it
// gives back the others, which may have landed before the turn (an
// optimistic claim whose reply was lost).
func (p *permit) ours(ctx context.Context, tn turn, e secondCalls, kvs []*mvccpb.KeyValue) (bool, error) {
	for _, kv := range kvs {
		if kv.CreateRevision >= tn.at {
			p.slot, _ = permitOf(p.dir, string(kv.Key))
			p.token = kv.CreateRevision
			return true, nil
		}
	}
	for _, kv := range kvs {
		if err := p.giveBack(ctx, tn, e, kv); err != nil {
			return true, err
		}
	}
	return false, nil
}

// claimSlot claims slot, after the turn, and reports whether it landed.
// A claim that failed for a failure that passes (a lost reply, a leader
// change) may have landed: after the pause the waiter's reads of the
// queue take, claimSlot reports it did not, and the next read tells
// (ours keeps a slot of ours claimed after the turn). Of the claims sent
// with one mod revision of our queue key at most one lands, as each moves
// it and compares it, and a release deletes every slot tried while its
// value is ours (PROTOCOL.md, step 5).
func (p *permit) claimSlot(ctx context.Context, tn turn, e secondCalls, slot int) (bool, error) {
	p.tried[slot] = true
	cr, err := e.txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(tn.key), "=", tn.rev), clientv3.Compare(clientv3.ModRevision(tn.key), "=", p.modOf(tn)),
			clientv3.Compare(clientv3.CreateRevision(permitKey(p.dir, slot)), "=", 0)).
		Then(p.claimOps(tn, slot)...).
		Commit()
	if err != nil && !p.noClaimRetry {
		return false, e.again(ctx, err)
	}
	if err != nil || !cr.Succeeded {
		return false, err
	}
	p.slot, p.token, p.qmod = slot, cr.Header.Revision, cr.Header.Revision
	return true, nil
}
