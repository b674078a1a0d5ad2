package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// MaxPartitions is the most partitions a group may have.
const MaxPartitions = 1 << 14

// ErrPartitions is matched by the error of a Join whose group has members
// that give it another number of partitions: the workers of one group must
// agree on it.
var ErrPartitions = errors.New("etcdlock: workers disagree on the group's partitions")

// Group is a fixed number of partitions (shards of a queue, tenant ranges)
// shared by the workers that join it: each partition is owned by one
// worker at a time, every live worker owns a fair share of them, and each
// partition's owner carries a fencing token, strictly greater than every
// earlier owner's of that partition. Get one with [Client.Group]; it is
// safe for concurrent use.
//
// A partition's token is the create revision of its key, as a lock's is:
// fence the resource that belongs to partition k (its rows, its objects,
// its offsets) with partition k's tokens, and a deposed owner's late
// writes are refused exactly as a deposed lock holder's are. Owners of
// different partitions hold at the same time and carry unrelated tokens,
// so do not fence one resource that every partition writes with "refuse
// anything lower".
//
// When to use which: one lock per shard, taken by hand, leaves the shares
// to the workers (each must count the others and poll for free shards); a
// [Semaphore] bounds how many work at once, and its slots are taken in
// arrival order, not spread; a Group spreads N partitions over the workers
// that are alive, moves few of them when one comes or goes, and sends no
// request while membership is quiet.
type Group struct {
	c    *Client
	name string
	n    int
}

// Group returns the group called name with the given number of partitions
// (1 … [MaxPartitions]). It does no I/O. Every worker of one name must
// give the same number: a Join that meets another fails with an error
// matching [ErrPartitions]. Groups live under prefix+"group/"+name+"/" (the
// name escaped, see [WithPrefix]): members under m/, partition k's queue
// under p/k/.
func (c *Client) Group(name string, partitions int) (*Group, error) {
	if c == nil || c.cli == nil {
		return nil, fmt.Errorf("%w: Group on a nil or zero Client", ErrInvalidArgument)
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions for %q, want 1 to %d", ErrInvalidArgument, partitions, name, MaxPartitions)
	}
	return &Group{c: c, name: name, n: partitions}, nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Partitions returns the group's number of partitions.
func (g *Group) Partitions() int { return g.n }

// Partition is one partition of a [Group] while a worker owns it: what
// the work function of [Group.Join] is given. It is a [fence.Holder]:
// pass it to [fence.NewGuard] and every write of the work carries the
// partition's token.
type Partition struct {
	// Set once before the work is called.
	index  int
	l      *Lock
	writes context.Context // see WriteContext
}

// Index returns the partition's number, from 0 to the group's partitions-1.
func (p *Partition) Index() int { return p.index }

// Token returns the partition's fencing token for this ownership: the
// create revision of its key, strictly greater than the token of every
// earlier owner of the same partition.
func (p *Partition) Token() fence.Token { return p.l.Token() }

// Issuer returns the name of the source of the partition's token
// ([WithIssuer]); "" by default. It makes a Partition a
// [fence.IssuerNamer].
func (p *Partition) Issuer() string { return p.l.Issuer() }

var _ fence.IssuerNamer = (*Partition)(nil)

// Done is closed once the worker has lost the partition, or may have lost
// it (see [Lock.Done]). A partition taken away by a rebalance ends the
// work's context first, and Done closes only once it is released.
func (p *Partition) Done() <-chan struct{} { return p.l.Done() }

// Err is nil while Done is open, and then says why it closed (see
// [Lock.Err]).
func (p *Partition) Err() error { return p.l.Err() }

// WriteContext returns the context for the work's writes to the
// partition's resources (a commit of its offset): it carries the values of
// the work's context, but a rebalance that moves the partition, or Join
// ending, does not cancel it. It ends when Done closes: the partition is
// released (once the work has returned, or the handoff grace has passed),
// lost, or its validity deadline ([Partition.ValidUntil]) has passed with
// no renewal; context.Cause then says why, as [Partition.Err] does.
//
// The work's context ends as soon as the partition is asked to move, and
// a write sent with it is cancelled in flight, its outcome unknown
// (fence.ErrUnknownOutcome) although the fence would have accepted it:
// the partition is still this worker's until it is released, which the
// handoff grace exists for. So let the work's context tell it to stop
// taking new work, and send each write that should finish with
// WriteContext: it lands, or the resource refuses it once a newer owner
// has written (fence.ErrStale). Every call returns the same context.
func (p *Partition) WriteContext() context.Context { return p.writes }

// Lease is the lease of the worker's session, which the partition's key
// is attached to.
func (p *Partition) Lease() clientv3.LeaseID { return p.l.Lease() }

// ValidUntil is the instant up to which the worker's lease is known to be
// alive (see [Lock.ValidUntil]); a [fence.Guard] refuses writes after it.
func (p *Partition) ValidUntil() time.Time { return p.l.ValidUntil() }

// WriteRefused is called by a [fence.Guard] that refused a write locally
// (see [Lock.WriteRefused]).
func (p *Partition) WriteRefused(ctx context.Context, err error) { p.l.WriteRefused(ctx, err) }

// Issued reports whether etcd has issued tokens up to t (see
// [Lock.Issued]).
func (p *Partition) Issued(ctx context.Context, t fence.Token) (bool, error) {
	return p.l.Issued(ctx, t)
}

// JoinOption configures [Group.Join].
type JoinOption interface{ applyJoin(*joinOptions) }

type joinOptions struct {
	grace        time.Duration // 0: the Client's TTL
	graceGiven   bool
	onError      func(partition int, err error)
	handoffFirst bool // the property test's control: release before the work returns
}

type joinOptionFunc func(*joinOptions)

func (f joinOptionFunc) applyJoin(o *joinOptions) { f(o) }

// WithHandoffGrace bounds how long a partition taken away by a rebalance
// (or left behind when Join ends) stays owned while its work has not
// returned: the time the work has to finish, its writes sent with
// [Partition.WriteContext] still going through. After d it is released
// anyway, and its next owner's higher token fences the late writes of the
// work still running. d must be positive; the default is the Client's
// TTL.
func WithHandoffGrace(d time.Duration) JoinOption {
	return joinOptionFunc(func(o *joinOptions) { o.grace, o.graceGiven = d, true })
}

// WithPartitionErrorHandler passes the errors of the work function to h
// instead of ending Join with them, and the errors of partitions that
// could not be taken for a reason that may pass (logged without a
// handler). h is called from each partition's goroutine, so for several partitions
// at once: it must be safe for concurrent use. A work's error returned
// after its partition was lost or moved is passed on too, unless it is
// the context's.
func WithPartitionErrorHandler(h func(partition int, err error)) JoinOption {
	return joinOptionFunc(func(o *joinOptions) { o.onError = h })
}

func joinOptionsOf(opts []JoinOption) (joinOptions, error) {
	var o joinOptions
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil JoinOption", ErrInvalidOption)
		}
		opt.applyJoin(&o)
	}
	if o.graceGiven && o.grace <= 0 {
		return o, fmt.Errorf("%w: handoff grace %v, want > 0", ErrInvalidOption, o.grace)
	}
	return o, nil
}

// Join makes this process a worker of the group until ctx ends, and calls
// work, each in its own goroutine, for every partition it owns. Workers
// find each other through their member keys (on the Client's session), and
// each computes the same share from the members it sees: once membership
// is quiet, every worker owns ⌊N/M⌋ or ⌈N/M⌉ of the N partitions (M
// workers), and every partition has an owner. A worker that joins takes
// only what the new share moves to it (rendezvous hashing, bounded to the
// fair share); one that leaves, or whose lease expires (a crash, a pause
// past its TTL, a partition from etcd), has its partitions taken over by
// the others.
//
// work is given the partition and a context that ends when the partition
// is taken away by a rebalance (context.Cause is [ErrMoved]), lost (its
// lease, its key, or the worker's membership: the cause matches
// [ErrLost]), or when Join ends (the cause is ctx's, or [ErrClosed]). A
// partition is released once work has returned, or after the handoff
// grace ([WithHandoffGrace]) if it has not: the next owner's token is
// greater either way, so a resource fenced with it refuses the writes of a
// work that is slow to stop. The work's context says when to stop; its
// writes, a commit in flight among them, should use
// [Partition.WriteContext], which a move does not cancel before the
// release. work should run until its context ends: when it returns while
// the partition is still owned, the partition is released
// and taken again (a new token), at once if it ran 100 ms or more and
// returned nil, else after a pause that doubles from 100 ms to 5 s (an
// error, or a work that returns at once, which must not turn into a loop
// of writes to etcd). A work that calls runtime.Goexit fails as one that
// returned an error. A partition is taken by waiting in its queue, as
// [Client.Lock] waits, so it is never owned twice with both leases alive.
//
// A partition whose owner leaves, hands it over or dies is owned again
// within TTL + 1 s of its release or its owner's lease expiry, also after
// any one fault on the way: each request a worker sends is bounded by half
// the TTL and then sent again (safely: each is conditional), and a watch
// whose stream hangs is replaced within about two thirds of the TTL. Such a
// request is passed to the handler of [WithPartitionErrorHandler], or
// logged.
//
// Join returns once every call of work has returned: ctx's error when ctx
// ends; [ErrClosed] when the Client is closed; at once, an error for
// invalid arguments (nil ctx or work, a nil option) and a
// [*PermissionError]; an error matching [ErrPartitions] when other members
// give the group another number of partitions; and the first error of
// work, unless [WithPartitionErrorHandler] is given. A panic in work
// releases the partition, ends the membership, and goes on in Join's
// goroutine. A membership lost with the session is joined again after a
// pause that doubles from 100 ms to 5 s.
//
// In steady state a worker sends no request but its session's keepalives:
// its view of the members, and each partition it owns or waits for, is
// watched on the Client's one watch stream.
func (g *Group) Join(ctx context.Context, work func(ctx context.Context, p *Partition) error, opts ...JoinOption) error {
	if err := checkCall(ctx, g == nil || g.c == nil || g.c.cli == nil, "Group", "Join"); err != nil {
		return err
	}
	if work == nil {
		return fmt.Errorf("%w: Join %q: nil work function", ErrInvalidArgument, g.name)
	}
	o, err := joinOptionsOf(opts)
	if err != nil {
		return err
	}
	if !o.graceGiven {
		o.grace = g.c.o.ttl
	}
	b := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	served := false // a membership of this Join has computed a share
	for {
		start := time.Now()
		ok, err := g.member(ctx, work, o)
		served = served || ok
		var pe *groupPanic
		switch {
		case errors.As(err, &pe):
			panic(pe.v)
		case ctx.Err() != nil:
			return ctx.Err()
		case g.c.life.Err() != nil || errors.Is(err, ErrClosed):
			return ErrClosed
		case errors.Is(err, errWork):
			return errors.Unwrap(err)
		case err != nil && (runFatal(err) || errors.Is(err, ErrPartitions) && !served):
			// Another N met on joining again, after a share was computed,
			// is a worker that came while ours was away: one misconfigured
			// worker must not stop correct ones for good, so that is
			// logged and retried, while it fails its own Join.
			return err
		}
		g.c.tel.log.LogAttrs(ctx, slog.LevelWarn, "etcdlock: group membership ended; joining again",
			slog.String("group", g.name), slog.Any("err", err))
		b.resetIfLasted(start)
		switch err := b.wait(ctx, g.c.life.Done()); {
		case errors.Is(err, errStopped):
			return ErrClosed
		case err != nil:
			return err
		}
	}
}

// errWork marks the error of a work function that ends Join (no handler):
// Join returns what it wraps.
var errWork = errors.New("etcdlock: work failed")

type workError struct{ err error }

func (e *workError) Error() string        { return e.err.Error() }
func (e *workError) Unwrap() error        { return e.err }
func (e *workError) Is(target error) bool { return target == errWork }

// groupPanic carries a work function's panic to Join's goroutine.
type groupPanic struct{ v any }

func (p *groupPanic) Error() string { return fmt.Sprintf("etcdlock: work panicked: %v", p.v) }

// ErrMoved is the cause (context.Cause) of a partition's work context when
// a rebalance moves the partition to another worker (see [Group.Join]).
var ErrMoved = errors.New("etcdlock: partition moved to another worker")

// errLeaving is the cause of a work's context when Join ends for a reason
// of its own (a keeper failed).
var errLeaving = errors.New("etcdlock: worker leaving the group")

// worker is one membership of a group: its member lock, its view of the
// members, and a keeper per partition it wants.
type worker struct {
	g    *Group
	o    joinOptions
	work func(context.Context, *Partition) error
	self string // our member key

	// No mutex for these: used by the membership's goroutine alone
	// (follow, reconcile, stop).
	members map[string]*mvccpb.KeyValue
	rev     int64
	keepers map[int]context.CancelCauseFunc
	served  bool           // a share was computed
	wg      sync.WaitGroup // keepers
	fns     sync.WaitGroup // work calls, also those a keeper gave up waiting for

	failOnce sync.Once
	failed   chan struct{} // closed by fail
	failErr  error         // set before failed closes
}

// member is one membership: it joins, follows the members and keeps the
// share it computes, until ctx ends, the membership is lost or a keeper
// fails; then it leaves (its member key first, so that the others start
// waiting for its partitions, then each partition once its work has
// returned or the grace passed) and waits for every work call.
//
// served reports whether the membership computed a share (it met no
// member giving another number of partitions, as far as it saw).
func (g *Group) member(ctx context.Context, work func(context.Context, *Partition) error, o joinOptions) (served bool, err error) {
	m, err := g.c.acquire(ctx, spot{kind: kindMember, name: g.name, wait: true, agreed: g.n, bound: g.bound()})
	if err != nil {
		return false, g.slow(ctx, err)
	}
	w := &worker{g: g, o: o, work: work, self: m.Key(), keepers: map[int]context.CancelCauseFunc{}, failed: make(chan struct{})}
	mctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(m.life(), func() { cancel(m.Err()) })
	err = w.follow(mctx)
	stop()
	cancel(errLeaving)
	m.unlockBounded(ctx)
	w.stop()
	select {
	case <-w.failed:
		return w.served, w.failErr
	default:
	}
	if err == nil {
		err = context.Cause(mctx)
	}
	return w.served, err
}

// bound bounds each request a worker sends (a member's or a partition's
// create, a read of the members or of a partition's queue, a release):
// half the TTL, and at least minBound. A request that has not returned by
// then (a member that lost its quorum, a stalled link, a reply lost on the
// way) is given up and the step sent again, which is safe because every
// request is conditional (see PROTOCOL.md): a create compares its lane's
// marker, a release the key's create revision, so the first one landing
// late or twice changes nothing. One such request then delays a
// partition's next owner by the bound and a retry: it is owned again
// within TTL + 1 s (for a TTL of 1 s, the bound's 1 s and a retry). The
// wait for a turn is not bounded: it is a watch, on a stream that is
// probed and replaced within two thirds of the TTL when it hangs.
func (g *Group) bound() time.Duration { return max(g.c.o.ttl/2, minBound) }

// minBound is the shortest bound on a group's request: below it, a loaded
// etcd's ordinary requests (an fsync on a slow disk, a machine running
// the race detector) would be given up and sent again over and over,
// moving partitions for nothing. It failed TestGroupRebalance under -race
// at TTL 1 s with half the TTL, 500 ms.
const minBound = time.Second

// slow says so of err when it is a request that did not return within
// the bound (ctx, the caller's, has not ended), and returns err otherwise.
func (g *Group) slow(ctx context.Context, err error) error {
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("etcdlock: group %q: a request to etcd did not return within %v (half the TTL, 1 s at least), and is sent again: %w", g.name, g.bound(), err)
}

// fail ends the membership with err (the first one given).
func (w *worker) fail(err error) {
	w.failOnce.Do(func() {
		w.failErr = err
		close(w.failed)
	})
}

// follow follows the members (see follower) and keeps the share they
// make ours, until ctx ends (nil), a keeper fails (errKeeperFailed), or a
// member gives another number of partitions (ErrPartitions). Each round
// reads the members, within the bound, and reconciles after the read and
// after each revision of events.
func (w *worker) follow(ctx context.Context) error {
	q := w.g.c.keys().groupMembers(w.g.name)
	f := &follower{c: w.g.c, key: q, end: clientv3.GetPrefixRangeEnd(q), stop: w.failed,
		read: w.read, apply: w.apply, await: w.await, ended: w.interrupted}
	if err := f.follow(ctx); !errors.Is(err, errStopped) {
		return err
	}
	return errKeeperFailed
}

// errKeeperFailed ends follow when a keeper called fail.
var errKeeperFailed = errors.New("etcdlock: a partition's keeper failed")

// read reads the members afresh and reconciles.
func (w *worker) read(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, w.g.bound())
	defer cancel()
	members, rev, err := w.g.c.readRange(rctx, w.g.c.keys().groupMembers(w.g.name))
	if err != nil {
		return 0, err
	}
	w.members, w.rev = members, rev
	return rev, w.reconcile(ctx)
}

// apply applies the watch's events to the members and reconciles.
func (w *worker) apply(ctx context.Context, evs []*mvccpb.Event) error {
	for _, ev := range evs {
		applyEvent(w.members, w.rev, ev)
	}
	return w.reconcile(ctx)
}

// await waits for the watch's note, and ends the round when a keeper fails.
func (w *worker) await(ctx context.Context, note <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.failed:
		return errKeeperFailed
	case <-note:
		return nil
	}
}

// interrupted ends the follow when the round ended for a reason that
// another round does not cure.
func (w *worker) interrupted(_ context.Context, err error) error {
	if errors.Is(err, ErrPartitions) || errors.Is(err, errKeeperFailed) {
		return err
	}
	return nil
}

// reconcile starts a keeper for each partition of our share that has
// none, and stops the keepers of partitions no longer ours. A member that
// gives the group another number of partitions is left out of the share;
// if we are not yet among the members we read (our key's event is on its
// way), nothing changes.
func (w *worker) reconcile(ctx context.Context) error {
	if _, ok := w.members[w.self]; !ok {
		return nil
	}
	names := make([]string, 0, len(w.members))
	for k, kv := range w.members {
		if n := recordOf(kv.Value).Permits; n != w.g.n {
			if k != w.self && !w.joinedBefore(kv) {
				continue // a later member's mistake: it fails its own Join
			}
			return fmt.Errorf("etcdlock: group %q: %w: %d asked, %s says %d", w.g.name, ErrPartitions, w.g.n, k, n)
		}
		names = append(names, k)
	}
	w.served = true
	owners, members := assign(names, w.g.n)
	mine := -1
	for i, m := range members {
		if m == w.self {
			mine = i
		}
	}
	want := make(map[int]bool)
	for k, i := range owners {
		if i == mine {
			want[k] = true
		}
	}
	for k, stop := range w.keepers {
		if !want[k] {
			stop(ErrMoved)
			delete(w.keepers, k)
		}
	}
	for k := range want {
		if _, ok := w.keepers[k]; !ok {
			kctx, cancel := context.WithCancelCause(ctx)
			w.keepers[k] = cancel
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer cancel(nil)
				w.keep(kctx, k)
			}()
		}
	}
	return nil
}

// joinedBefore reports whether member kv joined before us: our own
// member's create revision is its token.
func (w *worker) joinedBefore(kv *mvccpb.KeyValue) bool {
	self, ok := w.members[w.self]
	return ok && kv.CreateRevision < self.CreateRevision
}

// stop stops every keeper and waits for them, and for every work call.
func (w *worker) stop() {
	for k, stop := range w.keepers {
		stop(errLeaving)
		delete(w.keepers, k)
	}
	w.wg.Wait()
	w.fns.Wait()
}

// keep owns partition k while ctx lasts: it waits for it in its queue,
// runs the work under it, releases it, and takes it again if the work
// returned while it was still ours.
func (w *worker) keep(ctx context.Context, k int) {
	c := w.g.c
	b := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	name := partitionName(w.g.name, k)
	for ctx.Err() == nil {
		// The record's data names our member key, so that Inspect tells
		// apart two members of one session.
		l, err := c.acquire(ctx, spot{kind: kindPartition, name: name, wait: true, data: w.self, bound: w.g.bound()})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A request that did not return within its bound (spot.bound)
			// is such an error too: reported, and the partition waited
			// for again after a pause, 100 ms the first time.
			if runFatal(err) {
				w.fail(err)
				return
			}
			w.report(ctx, k, w.g.slow(ctx, err))
			if b.wait(ctx, w.failed) != nil {
				return
			}
			continue
		}
		start := time.Now()
		failed := w.run(ctx, k, l)
		select {
		case <-w.failed: // a panic or a work's error ends the membership: no new call
			return
		default:
		}
		if !failed && time.Since(start) >= b.min {
			b.reset()
			continue
		}
		// The work failed, or returned at once: a work that returns nil
		// at once ("nothing to do") must not take the partition again in
		// a tight loop of two writes to etcd a turn.
		if b.wait(ctx, w.failed) != nil {
			return
		}
	}
}

// report passes a partition's error to the handler, or logs it.
func (w *worker) report(ctx context.Context, k int, err error) {
	if w.o.onError != nil {
		w.o.onError(k, err)
		return
	}
	w.g.c.tel.log.LogAttrs(ctx, slog.LevelWarn, "etcdlock: partition error",
		slog.String("group", w.g.name), slog.Int("partition", k), slog.Any("err", err))
}

// run runs the work under partition k's lock l, and releases l once the
// work has returned, or the grace has passed after ctx ended or l was
// lost. failed: the work returned an error while the partition was ours.
func (w *worker) run(ctx context.Context, k int, l *Lock) (failed bool) {
	c := w.g.c
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.life(), func() {
		cancel(wrapLost(l.Err(), "etcdlock: partition %d of %q (token %d) lost: ", k, w.g.name, l.Token()))
	})
	defer stop()
	// The writes' context ends with l (released or lost), never with ctx.
	wctx, cancelWrites := context.WithCancelCause(context.WithoutCancel(ctx))
	defer func() { cancelWrites(l.Err()) }() // l is released by then
	defer context.AfterFunc(l.life(), func() { cancelWrites(l.Err()) })()
	p := &Partition{index: k, l: l, writes: wctx}
	res := make(chan error, 1)
	w.fns.Add(1)
	go func() {
		defer w.fns.Done()
		returned := false
		defer func() {
			if !returned {
				v := recover()
				if v == nil { // runtime.Goexit (t.FailNow): no panic to go on with
					res <- errGoexit
					return
				}
				w.fail(&groupPanic{v: v})
				res <- errPanicked
			}
		}()
		err := w.work(fctx, p)
		returned = true
		res <- err
	}()
	at := c.tel.groupAttrs(w.g.name)
	c.tel.groupOwned.Add(ctx, 1, at.add...)
	defer c.tel.groupOwned.Add(context.WithoutCancel(ctx), -1, at.add...)
	var werr error
	returned := true
	if w.o.handoffFirst {
		select {
		case werr = <-res:
		case <-fctx.Done():
			returned = false // the control: hand off without waiting for the work
		}
	} else {
		select {
		case werr = <-res:
		case <-fctx.Done():
			t := time.NewTimer(w.o.grace)
			select {
			case werr = <-res:
			case <-t.C:
				returned = false
				c.tel.log.LogAttrs(ctx, slog.LevelWarn, "etcdlock: partition's work still running after the handoff grace; releasing it",
					slog.String("group", w.g.name), slog.Int("partition", k), slog.Int64("token", int64(l.Token())),
					slog.Duration("grace", w.o.grace))
			}
			t.Stop()
		}
	}
	held := l.Err() == nil
	moved := ctx.Err() != nil
	l.unlockBounded(ctx)
	if held && moved {
		c.tel.groupHandoffs.Add(context.WithoutCancel(ctx), 1, at.add...)
	}
	switch {
	case !returned || errors.Is(werr, errPanicked):
		return false
	case werr != nil && held && !moved:
		err := fmt.Errorf("etcdlock: group %q, partition %d, token %d: %w", w.g.name, k, l.Token(), werr)
		if w.o.onError == nil {
			w.fail(&workError{err: err})
			return true
		}
		w.o.onError(k, err)
		return true
	case werr != nil && !errors.Is(werr, context.Canceled) && !errors.Is(werr, context.DeadlineExceeded) &&
		!errors.Is(werr, ErrLost) && !errors.Is(werr, ErrMoved) && !errors.Is(werr, ErrClosed):
		// The work's own error, returned after its partition ended: said,
		// not acted on (the partition is gone already).
		w.report(ctx, k, fmt.Errorf("etcdlock: group %q, partition %d, token %d, after the partition ended: %w", w.g.name, k, l.Token(), werr))
	}
	return false
}

// errGoexit is the error of a work call that called runtime.Goexit.
var errGoexit = errors.New("etcdlock: work called runtime.Goexit")

// errPanicked is what a work call that panicked sends to its run.
var errPanicked = errors.New("etcdlock: work panicked")

// partitionName is the name of partition k's lock in group name: the
// group's name, '/', k (the kind's queue splits it at the last '/').
func partitionName(group string, k int) string { return group + "/" + strconv.Itoa(k) }
