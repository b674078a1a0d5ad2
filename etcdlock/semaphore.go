package etcdlock

import (
	"context"
	"fmt"
)

// MaxPermits is the most permits a semaphore may have.
const MaxPermits = 1024

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
