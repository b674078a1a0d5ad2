package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// MultiLock is the hold of several named locks, taken all or none by
// [Client.LockAll]. It is safe for concurrent use.
type MultiLock struct {
	locks []*Lock // in name order
	done  chan struct{}
	stops []func() bool

	mu  sync.Mutex // guards err
	err error      // why done was closed; set once, before it is
}

// LockAll acquires every lock named in names, or none: it returns once it
// holds them all, and when it fails (ctx ended, a lock could not be
// taken) it releases those it took and returns the error, leaving no key
// behind (see [Client.Lock]).
//
// Callers asking for overlapping sets, in any order, do not deadlock:
// LockAll takes the names in sorted order, each as [Client.Lock] does
// (arrival order, each with its own token). Code that takes several locks
// one by one should take them in the same order. While it waits for a
// name it already holds the names sorted before it, as any waiter for
// them would have to wait for it anyway.
//
// A change that reads before it writes (a transfer: read both balances,
// write both) must claim the resources as it reads them, or a newer
// holder's writes computed from a read that an older holder's late write
// changed lose that write: do it in one transaction that claims them all
// first, as fence/postgres's RunInTxHeld(ctx, pool, m, fn) does with
// [MultiLock.Claims] (on etcd, Redis and DynamoDB, the stores'
// UpdateHeld(ctx, m, fn) writes the keys in one request), or read with
// the stores' GetForUpdate (see docs/reading.md).
//
// Duplicate names are taken once. An empty names fails with
// [ErrInvalidArgument], an invalid name with [ErrInvalidName], before any
// request. opts apply to every lock ([Shared] takes them all as a reader).
func (c *Client) LockAll(ctx context.Context, names []string, opts ...LockOption) (*MultiLock, error) {
	if err := c.checkCall(ctx, "LockAll"); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: LockAll: no names", ErrInvalidArgument)
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	for _, n := range names {
		if err := validateName(n); err != nil {
			return nil, err
		}
	}
	o, err := lockOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	m := &MultiLock{done: make(chan struct{})}
	wctx, cancel := o.waitContext(ctx) // WithWait bounds the wait for the whole set
	defer cancel()
	each := append(slices.Clip(opts), noWait) // and not each Lock's again
	for _, n := range names {
		l, err := c.Lock(wctx, n, each...)
		if err != nil {
			m.giveBack(ctx)
			return nil, fmt.Errorf("etcdlock: LockAll %q: %w", names, o.waited(ctx, wctx, n, err))
		}
		m.locks = append(m.locks, l)
	}
	// A lock taken first may have been lost while LockAll waited for the
	// next (its key deleted, say): never return a MultiLock that this
	// process knows is held only in part, as Lock never returns a lock it
	// knows lost. A loss from now on closes Done (below).
	for _, l := range m.locks {
		if err := l.Err(); err != nil {
			m.giveBack(ctx)
			return nil, wrapLost(err, "etcdlock: LockAll %q: %q lost while waiting for the rest: ", names, l.Name())
		}
	}
	for _, l := range m.locks {
		m.stops = append(m.stops, context.AfterFunc(l.life(), func() {
			m.end(wrapLost(l.Err(), "etcdlock: %q: ", l.Name()))
		}))
	}
	return m, nil
}

// giveBack unlocks the locks taken by a LockAll that failed, bounded by the
// cleanup timeout. It drops their minimum hold first: the caller never got
// them, so nothing ran under them, and keeping their keys for the hold
// would use up the period of a job that did not run.
func (m *MultiLock) giveBack(ctx context.Context) {
	for _, l := range slices.Backward(m.locks) {
		l.dropHold()
		l.unlockBounded(ctx)
	}
}

// end closes done with cause, unless it was closed already.
func (m *MultiLock) end(cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = cause
		close(m.done)
	}
}

// Locks returns the locks held, one per name, sorted by name: the token of
// each, and a [fence.Guard] of each ([fence.NewGuard]) for the resource
// that name protects.
func (m *MultiLock) Locks() []*Lock { return slices.Clone(m.locks) }

// Claims returns each lock's name and token, in name order: what a fenced
// transaction over the resources the locks guard claims (fence/postgres's
// and fence/sql's RunInTxAll take a [fence.Claimer]). A nil MultiLock has
// none.
func (m *MultiLock) Claims() []fence.Claim {
	if m == nil {
		return nil
	}
	cs := make([]fence.Claim, 0, len(m.locks))
	for _, l := range m.locks {
		cs = append(cs, fence.Claim{Resource: l.Name(), Token: l.Token()})
	}
	return cs
}

var _ fence.Claimer = (*MultiLock)(nil)

// Lock returns the lock held for name, or nil if name is not one of them.
func (m *MultiLock) Lock(name string) *Lock {
	for _, l := range m.locks {
		if l.Name() == name {
			return l
		}
	}
	return nil
}

// Done returns a channel that is closed as soon as any of the locks ends:
// one of them was lost (see [Lock.Done]), or Unlock released them.
func (m *MultiLock) Done() <-chan struct{} { return m.done }

// Err returns nil while every lock is held. After Done is closed it
// returns the first lock's end: [ErrUnlocked] after Unlock, or an error
// that names the lock and matches its Err ([ErrLost] and its cause,
// [ErrClosed]).
func (m *MultiLock) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// ValidUntil returns the earliest validity deadline of the locks (see
// [Lock.ValidUntil]).
func (m *MultiLock) ValidUntil() time.Time {
	var until time.Time
	for _, l := range m.locks {
		if u := l.ValidUntil(); until.IsZero() || u.Before(until) {
			until = u
		}
	}
	return until
}

// Unlock releases every lock, as [Lock.Unlock] does each, in reverse name
// order. It returns nil when every key was deleted by this Unlock or an
// earlier one, and otherwise the errors of the locks whose release failed
// or that had been lost, joined (each matches what that lock's Unlock
// returned). ctx bounds the requests.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if err := checkCall(ctx, m == nil || m.done == nil, "MultiLock", "Unlock"); err != nil {
		return err
	}
	m.end(ErrUnlocked)
	var errs []error
	for _, l := range slices.Backward(m.locks) {
		if err := l.Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, stop := range m.stops {
		stop()
	}
	return errors.Join(errs...)
}
