package etcdlock

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// MaxPermits is the most permits a semaphore may have.
const MaxPermits = 1024

// ErrPermits is matched by the error of an acquisition whose semaphore is
// used by others with another number of permits: callers of one name must
// agree on it.
var ErrPermits = errors.New("etcdlock: callers disagree on the semaphore's permits")

// Semaphore is a counting semaphore on etcd: at most its number of permits
// are held at once, by holders whose leases are alive, served in arrival
// order. Get one with [Client.Semaphore]; it is safe for concurrent use.
//
// Each permit has a slot, 0 … permits−1 ([Lock.Slot]), held by one holder
// at a time, and a permit's token ([Lock.Token]) is the create revision of
// its slot's key: strictly greater than the token of every earlier holder
// of the same slot. Fence a resource owned by slot i (shard i of a worker
// pool) with the tokens of slot i. Holders of different slots hold at the
// same time and carry unrelated tokens, so do not fence one resource that
// every holder writes with "refuse anything lower": it would refuse the
// innocent. The semaphore limits how many work at once; it does not fence
// a resource they share.
type Semaphore struct {
	c       *Client
	name    string
	permits int
}

// Semaphore returns the semaphore called name with the given number of
// permits (1 … [MaxPermits]). It does no I/O. Every caller of one name
// must give the same number: an acquisition that meets another fails with
// an error matching [ErrPermits]. Semaphores live under
// prefix+"sem/"+name+"/" (the name escaped, see [WithPrefix]), apart from
// the names of every other kind.
func (c *Client) Semaphore(name string, permits int) (*Semaphore, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d permits for %q, want 1 to %d", ErrInvalidArgument, permits, name, MaxPermits)
	}
	return &Semaphore{c: c, name: name, permits: permits}, nil
}

// Acquire takes a permit, waiting until fewer than the semaphore's permits
// are held by acquisitions that came before it, or until ctx ends. It
// behaves as [Client.Lock] does otherwise: arrival order, a cancelled call
// leaves no key behind, a late or repeated request cannot land afterwards,
// and the [Lock] it returns is released with Unlock and reports its loss
// through Done and Err. Its Token is its slot's (see [Semaphore]).
func (sm *Semaphore) Acquire(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return sm.acquire(ctx, true, opts)
}

// TryAcquire takes a permit if one is free and no one waits for one, and
// otherwise returns a [*LockedError] (matching [ErrLocked]) at once,
// leaving no key behind.
func (sm *Semaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return sm.acquire(ctx, false, opts)
}

func (sm *Semaphore) acquire(ctx context.Context, wait bool, opts []LockOption) (*Lock, error) {
	if err := checkCall(ctx, sm == nil || sm.c == nil || sm.c.cli == nil, "Semaphore", "Acquire"); err != nil {
		return nil, err
	}
	o, err := lockOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	if o.shared {
		return nil, fmt.Errorf("%w: a semaphore has no readers (Shared)", ErrInvalidOption)
	}
	if o.minHold != 0 {
		return nil, fmt.Errorf("%w: a semaphore has no minimum hold (WithMinHold)", ErrInvalidOption)
	}
	wctx, cancel := o.waitContext(ctx)
	defer cancel()
	l, err := sm.c.acquire(wctx, spot{kind: kindSemaphore, name: sm.name, data: o.metadata,
		wait: wait, noWatch: o.noWatch, limit: sm.permits, agreed: sm.permits})
	return l, o.waited(ctx, wctx, sm.name, err)
}

// Inspect reads the semaphore's queue, as [Client.Inspect] does a lock's:
// Holders are the acquisitions entitled to a permit, each with its Slot
// and, as Token, its permit's token ([Lock.Token]) once it has claimed
// one; Waiters the rest (see [Client.InspectSemaphore]).
func (sm *Semaphore) Inspect(ctx context.Context) (Queue, error) {
	if err := checkCall(ctx, sm == nil || sm.c == nil || sm.c.cli == nil, "Semaphore", "Inspect"); err != nil {
		return Queue{}, err
	}
	sq, err := sm.c.InspectSemaphore(ctx, sm.name)
	return sq.Queue, err
}

// Slot returns the slot of a semaphore's permit (see [Semaphore]), and 0
// for any other lock. A slot is from 0 to permits-1 and held by one holder
// at a time; it is not the lowest free one: an acquisition starts its
// search at its own queue key's create revision modulo the permits, so
// that waiters let in by the same release do not all claim the same slot.
func (l *Lock) Slot() int {
	if p, ok := l.t.second.(*permit); ok {
		return p.slot
	}
	return 0
}

// permit is a semaphore acquisition's claim on one of its permits. The
// claim puts the slot's key, on the session's lease, with the holder's id
// as its value, while the slot's key does not exist and our queue key is
// as created: the claim also rewrites our queue key's record (with the
// slot), so that a copy of it, or of a claim of another slot, can never
// land after one has (their compare of our key's mod revision fails), nor
// after our key is deleted. Every release deletes, in its transaction, the
// keys of the slots tried whose value is still ours. It is the engine's
// secondKey for kindSemaphore (see kindTable).
type permit struct {
	// No mutex: written only by its acquisition's goroutine (read, saw,
	// claim), and only read once the acquisition has returned.
	name    string // the semaphore's
	permits int    // the semaphore's, as this caller gives them
	// unconditional: a release deletes every slot key tried, whoever's it
	// is now (the controls of the request-fault tests)
	unconditional bool
	dir           string             // the prefix of the slots' keys
	id            string             // a slot key's value while ours; set once our key is created
	tried         map[int]bool       // slots whose claim was sent and may have landed
	slot          int                // the slot held, once claimed
	token         int64              // the slot key's create revision, once claimed (0 before)
	seen          []*mvccpb.KeyValue // the slots' keys, read by the last read of the queue; nil once used
	seenRev       int64              // the revision seen was read at
}

// newPermit is kindSemaphore's secondKey (see kindTable): the permit an
// acquisition of the semaphore name, of permits, claims once its turn has come.
func newPermit(p layout, name string, permits int, ctl controls) secondKey {
	return &permit{name: name, permits: permits, unconditional: ctl.unconditionalSlotRelease,
		dir: p.semPermits(name), tried: map[int]bool{}}
}

// read is a read of the slots' keys, sent with each read of the queue, so
// that the claim that may follow needs no read of its own.
func (p *permit) read() clientv3.Op { return clientv3.OpGet(p.dir, clientv3.WithPrefix()) }

// saw keeps the slots' keys a read (see read) returned at revision rev
// (none kept when there were none: the claim then reads them again).
func (p *permit) saw(kvs []*mvccpb.KeyValue, rev int64) { p.seen, p.seenRev = kvs, rev }

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

// claim takes a free permit slot for t, whose key is among the first
// p.permits of its queue, and returns the slot's token. When every slot is
// taken (by a holder whose queue key someone deleted, or by callers that
// disagree on the permits), it waits for one to be freed.
func (p *permit) claim(ctx context.Context, t turn, e secondCalls) (int64, error) {
	if p.id == "" {
		id, _ := json.Marshal(permitValue{Key: t.key, Rev: t.rev, Permits: p.permits})
		p.id = string(id)
	}
	for {
		// The first pass uses the slots read with the queue, in the
		// transaction that found our key alive and our turn come.
		slotKeys, readRev := p.slotsSeen()
		if slotKeys == nil {
			resp, err := e.txn(ctx).Then(clientv3.OpGet(p.dir, clientv3.WithPrefix()), clientv3.OpGet(t.key)).Commit()
			if err != nil {
				return 0, err
			}
			if ours := resp.Responses[1].GetResponseRange().Kvs; len(ours) == 0 || ours[0].CreateRevision != t.rev {
				return 0, e.lost()
			}
			slotKeys, readRev = resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision
		}
		taken := map[int]bool{}
		var held []Entry // the slots' holders, for TryAcquire's answer
		for _, kv := range slotKeys {
			slot, ok := permitOf(p.dir, string(kv.Key))
			if !ok {
				continue // not a slot's key
			}
			if string(kv.Value) == p.id { // a claim of ours landed
				p.slot, p.tried, p.token = slot, map[int]bool{slot: true}, kv.CreateRevision
				return kv.CreateRevision, nil
			}
			var v permitValue
			if json.Unmarshal(kv.Value, &v) == nil && v.Permits != p.permits {
				return 0, fmt.Errorf("etcdlock: semaphore %q: %w: %d asked, slot %d held with %d", p.name, ErrPermits, p.permits, slot, v.Permits)
			}
			e := entryOf(kv)
			e.Slot = slot
			held = append(held, e)
			taken[slot] = true
		}
		// Start the search at a slot of our own (by our key's create
		// revision), not at 0: waiters given their turn by the same
		// releases read the same free slots, and if all chose the lowest,
		// all but one claim would be refused and read again.
		free := -1
		for i := range p.permits {
			if slot := (int(t.rev%int64(p.permits)) + i) % p.permits; !taken[slot] {
				free = slot
				break
			}
		}
		if free < 0 && !t.wait {
			// TryAcquire answers at once: every slot is held, by a holder
			// whose queue key someone deleted (it keeps its slot's key), or
			// by callers that disagree on the permits. Waiting here for a
			// slot would hold TryAcquire until its context ended.
			slices.SortFunc(held, func(a, b Entry) int { return cmp.Compare(a.Token, b.Token) }) // arrival order, not the keys'
			return 0, &LockedError{Name: p.name, Holder: held[0], Holders: held}
		}
		if free < 0 {
			if err := e.waitRange(ctx, p.dir, readRev+1); err != nil {
				return 0, err
			}
			continue
		}
		p.tried[free] = true
		cr, err := e.txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev), clientv3.Compare(clientv3.ModRevision(t.key), "=", t.rev),
				clientv3.Compare(clientv3.CreateRevision(permitKey(p.dir, free)), "=", 0)).
			Then(clientv3.OpPut(permitKey(p.dir, free), p.id, clientv3.WithLease(t.lease)), clientv3.OpPut(t.key, t.record(free), clientv3.WithIgnoreLease())).
			Commit()
		if err != nil {
			return 0, err
		}
		if cr.Succeeded {
			p.slot, p.tried, p.token = free, map[int]bool{free: true}, cr.Header.Revision
			return cr.Header.Revision, nil
		}
		// Taken meanwhile, or a claim of ours landed, or our key is gone:
		// the next read tells.
	}
}

// holder returns e, a queue key's entry, with the slot and the permit's
// token (the one its holder fences with) when the slots read with the
// queue show it holds one.
func (p *permit) holder(e Entry) Entry {
	if p.seen == nil {
		return e
	}
	for _, kv := range p.seen {
		var v permitValue
		slot, ok := permitOf(p.dir, string(kv.Key))
		if ok && json.Unmarshal(kv.Value, &v) == nil && v.Key == e.Key && v.Rev == int64(e.Token) {
			e.Slot, e.Token = slot, fence.Token(kv.CreateRevision)
		}
	}
	return e
}

// slotsSeen returns the slots' keys the last read of the queue returned,
// and its revision, once: nil when there are none to use.
func (p *permit) slotsSeen() ([]*mvccpb.KeyValue, int64) {
	kvs := p.seen
	p.seen = nil
	return kvs, p.seenRev
}
