package etcdlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// The rows whose acquisitions return Locks (lock, semaphore, rwlock,
// lockall, minhold) share one driver: each operation takes an
// acquisition of the row's kind, holds it a moment, and releases it;
// etcd's record and the tracker check every grant.

// kindOp takes one random acquisition of a row's kind by c.
type kindOp func(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, e *propEnv) (propHeld, error)

// propHeld is one acquisition granted: its locks and how to give them back.
type propHeld struct {
	locks  []*etcdlock.Lock
	writer bool // excludes every other holder of its names (a lock, a writer)
	slot   bool // a semaphore's permit: excludes the holders of its slot
	turn   bool // check it came in its turn by a revision read just after it (readers and writers only: a Get a grant)
	unlock func(context.Context) error
}

// propGrant is one lock granted.
type propGrant struct {
	l      *etcdlock.Lock
	at     time.Time
	writer bool
	slot   bool
	rev    int64 // a revision read just after it was granted (propHeld.turn); 0 if unknown
}

// propPermits are the semaphore rows' permits, unless their run says
// (propRun.permits).
const propPermits = 2

// semPermits are a semaphore row's permits.
func (r propRun) semPermits() int { return cmp.Or(r.permits, propPermits) }

type queueDriver struct {
	e        *propEnv
	acquire  kindOp
	checks   []func(map[int64]*propGrant) []string // the row's own, of every grant
	rec      *record
	tr       *tracker
	unlocked sync.Map // locks whose Unlock failed -> true
}

// queueKind is the driver of a row whose acquisitions return Locks.
func queueKind(acquire kindOp, checks ...func(map[int64]*propGrant) []string) func(*propEnv) propDriver {
	return func(e *propEnv) propDriver {
		rec, err := watchRecord(e.t.Context(), e.direct, prefix(e.t), e.cfg.semPermits())
		if err != nil {
			e.t.Fatal(err)
		}
		tr := &tracker{direct: e.direct, prefix: prefix(e.t), permits: e.cfg.semPermits(), held: map[string]map[*propGrant]bool{},
			granted: map[int64]*propGrant{}, slotTok: map[string]int64{}}
		return &queueDriver{e: e, acquire: acquire, checks: checks, rec: rec, tr: tr}
	}
}

func (d *queueDriver) op(ctx context.Context, rng *rand.Rand, w int) bool {
	h, err := d.acquire(ctx, rng, d.e.owners[w%len(d.e.owners)], d.e)
	if err != nil {
		d.e.add("errors", 1)
		return false
	}
	for _, l := range h.locks {
		d.tr.grant(ctx, l, h)
	}
	if n := rng.IntN(4); n > 0 { // the work under the lock
		time.Sleep(time.Duration(n) * 500 * time.Microsecond)
	}
	for _, l := range h.locks {
		d.tr.release(l)
	}
	if err := propUnlock(rng, h.unlock); err != nil {
		d.e.add("unlock errors", 1)
		for _, l := range h.locks {
			d.unlocked.Store(l, true)
		}
	}
	return true
}

// propUnlock gives an acquisition back with a short deadline (a request
// held by a fault keeps the name from everyone until the deadline), one
// time in ten too short to succeed.
func propUnlock(rng *rand.Rand, unlock func(context.Context) error) error {
	d := 200 * time.Millisecond
	if rng.IntN(10) == 0 {
		d = time.Duration(rng.IntN(2000)) * time.Microsecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return unlock(ctx)
}

func (d *queueDriver) seen() []string {
	granted := d.tr.grantedCopy()
	bad := append(d.tr.violationsCopy(), d.rec.check(granted)...)
	for _, check := range d.checks {
		bad = append(bad, check(granted)...)
	}
	return bad
}

// settle waits for failed Unlocks to finish in the background, checks
// etcd's record, the row's own checks and what is left, closes the owners
// and checks nothing is left then.
func (d *queueDriver) settle() []string {
	t := d.e.t
	bad := d.tr.violationsCopy()
	deadline := time.After(propTTL + 10*time.Second)
	d.unlocked.Range(func(k, _ any) bool {
		select {
		case <-k.(*etcdlock.Lock).Done():
		case <-deadline:
			bad = append(bad, fmt.Sprintf("token %d: Done still open 10s after a failed Unlock", k.(*etcdlock.Lock).Token()))
		}
		return true
	})
	d.e.closeFaults()
	resp, err := d.e.direct.Put(t.Context(), prefix(t)+"end", "")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := d.rec.catchUp(cctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	granted := d.tr.grantedCopy()
	bad = append(append(bad, d.rec.check(granted)...), d.lostNoticed(granted)...)
	bad = append(bad, d.rec.orphanSlots(t.Context())...)
	for _, check := range d.checks {
		bad = append(bad, check(granted)...)
	}
	d.e.atLeast("most holders", d.tr.mostHolding())
	d.e.atLeast("give-backs", d.rec.givenBack())
	for _, c := range d.e.owners {
		c.Close(t.Context())
	}
	return append(bad, keysLeft(t, d.e.direct, d.e.cfg.linger)...)
}

// keysLeft reports the keys of locks, semaphores and markers still there
// after every owner closed, once linger has passed.
func keysLeft(t *testing.T, direct *clientv3.Client, linger time.Duration) []string {
	k := keysOf(t)
	for deadline := time.Now().Add(linger); ; time.Sleep(50 * time.Millisecond) {
		var bad []string
		for _, dir := range []string{k.Locks(), k.Semaphores(), k.Markers()} {
			if ks := keys(t, direct, dir); len(ks) != 0 {
				bad = append(bad, fmt.Sprintf("keys left under %s after closing every owner: %v", dir, ks))
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
	}
}

// lostNoticed checks that every holder whose key was taken noticed it,
// and counts the locks lost.
func (d *queueDriver) lostNoticed(granted map[int64]*propGrant) []string {
	var bad []string
	for _, tok := range d.rec.foreignCopy() {
		if g := granted[tok]; g != nil {
			select {
			case <-g.l.Done():
				if !errors.Is(g.l.Err(), etcdlock.ErrLost) {
					bad = append(bad, fmt.Sprintf("token %d: hold key taken, Err %v", tok, g.l.Err()))
				}
			case <-time.After(propTTL + time.Second):
				bad = append(bad, fmt.Sprintf("token %d: hold key taken, Done still open", tok))
			}
		}
	}
	for _, g := range granted {
		if errors.Is(g.l.Err(), etcdlock.ErrLost) {
			d.e.add("lost", 1)
		}
	}
	return bad
}

// acquireCtx bounds an acquisition by a random deadline, or by a
// cancellation at a random moment.
func acquireCtx(ctx context.Context, rng *rand.Rand, base, spread int) (context.Context, context.CancelFunc) {
	d := time.Duration(base+rng.IntN(spread)) * time.Millisecond
	if raceEnabled {
		// The race detector slows the embedded etcd server too: an
		// acquisition takes several of its requests, and with the fixed
		// runs' deadlines most would fail, few be granted.
		d *= 4
	}
	if rng.IntN(2) == 0 {
		return context.WithTimeout(ctx, d)
	}
	lctx, cancel := context.WithCancel(ctx)
	stop := time.AfterFunc(d, cancel)
	return lctx, func() { stop.Stop(); cancel() }
}

// asLock, asReader and asPermit make an acquisition of one lock.
var asLock, asReader, asPermit = held(true, false), held(false, false), held(false, true)

func held(writer, slot bool) func(*etcdlock.Lock, error) (propHeld, error) {
	return func(l *etcdlock.Lock, err error) (propHeld, error) {
		if err != nil {
			return propHeld{}, err
		}
		return propHeld{locks: []*etcdlock.Lock{l}, writer: writer, slot: slot, unlock: l.Unlock}, nil
	}
}

// lockOp takes a random name with Lock, or one time in ten TryLock.
func lockOp(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, e *propEnv) (propHeld, error) {
	name := fmt.Sprintf("n%d", rng.IntN(e.cfg.names))
	lctx, cancel := acquireCtx(ctx, rng, 5, 250)
	defer cancel()
	if rng.IntN(10) == 0 {
		return asLock(c.TryLock(lctx, name))
	}
	return asLock(c.Lock(lctx, name))
}

// semaphoreOp takes a permit of a random semaphore of 2 permits, one time
// in ten with TryAcquire.
func semaphoreOp(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, e *propEnv) (propHeld, error) {
	sm, err := c.Semaphore(fmt.Sprintf("n%d", rng.IntN(e.cfg.names)), e.cfg.semPermits())
	if err != nil {
		return propHeld{}, err
	}
	lctx, cancel := acquireCtx(ctx, rng, 5, 250)
	defer cancel()
	if rng.IntN(10) == 0 {
		return asPermit(sm.TryAcquire(lctx))
	}
	return asPermit(sm.Acquire(lctx))
}

// rwOp takes a random name as a reader (two times in three) or a writer,
// one time in ten with Try.
func rwOp(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, e *propEnv) (propHeld, error) {
	name := fmt.Sprintf("n%d", rng.IntN(e.cfg.names))
	lctx, cancel := acquireCtx(ctx, rng, 5, 250)
	defer cancel()
	try, writer := rng.IntN(10) == 0, rng.IntN(3) == 0
	var h propHeld
	var err error
	switch {
	case writer && try:
		h, err = asLock(c.TryLock(lctx, name))
	case writer:
		h, err = asLock(c.Lock(lctx, name))
	case try:
		h, err = asReader(c.TryRLock(lctx, name))
	default:
		h, err = asReader(c.RLock(lctx, name))
	}
	h.turn = true
	return h, err
}

// lockAllOp takes 2 or 3 of the names with LockAll, in a random order.
func lockAllOp(ctx context.Context, rng *rand.Rand, c *etcdlock.Client, e *propEnv) (propHeld, error) {
	names := make([]string, e.cfg.names)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	lctx, cancel := acquireCtx(ctx, rng, 20, 500)
	defer cancel()
	m, err := c.LockAll(lctx, names[:2+rng.IntN(2)])
	if err != nil {
		return propHeld{}, err
	}
	return propHeld{locks: m.Locks(), writer: true, unlock: m.Unlock}, nil
}

// minHoldOp runs the job: TryLock with WithMinHold (none in the control).
func minHoldOp(ctx context.Context, _ *rand.Rand, c *etcdlock.Client, e *propEnv) (propHeld, error) {
	var opts []etcdlock.LockOption
	if !e.reverted {
		opts = append(opts, etcdlock.WithMinHold(propHold))
	}
	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	return asLock(c.TryLock(lctx, "job", opts...))
}

// minHoldApart checks that successive runs of the job (by token) started
// at least the hold apart, and that no run lost its lock.
func minHoldApart(granted map[int64]*propGrant) []string {
	var bad []string
	toks := slices.Sorted(maps.Keys(granted))
	for i, tok := range toks {
		if errors.Is(granted[tok].l.Err(), etcdlock.ErrLost) {
			bad = append(bad, fmt.Sprintf("token %d: lost", tok))
		}
		if i == 0 {
			continue
		}
		if gap := granted[tok].at.Sub(granted[toks[i-1]].at); gap < propHold-50*time.Millisecond {
			bad = append(bad, fmt.Sprintf("runs of tokens %d and %d closer than the hold %v: %v apart", toks[i-1], tok, propHold, gap))
		}
	}
	return bad
}
