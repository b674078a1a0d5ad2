package etcdlock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures a [Client]. Options are created by the With… functions.
type Option interface {
	apply(*options)
}

type options struct {
	ttl            time.Duration
	prefix         string
	cleanupTimeout time.Duration
	owner          string
	issuer         string // WithIssuer; "": none
	hasIssuer      bool   // WithIssuer was given (an empty name is refused)
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	logger         *slog.Logger
	nameAttribute  bool
	ctl            controls
}

// controls each revert one protection, for the control run of the test
// that proves it: the run must then find the violation the protection
// prevents. They are set only by the tests' options (export_test.go), and
// per Client, so that a control run and the tests running beside it in
// parallel do not share them.
type controls struct {
	unconditionalRelease     bool // a release deletes its lane's key whatever its create revision (ticket.created)
	unconditionalSlotRelease bool // a semaphore's release deletes every slot key it tried, whoever's it is now (permit.release)
	unconditionalGiveBack    bool // a semaphore's give-back deletes the slot's key, whoever's it is now (permit.giveBack)
	noGiveBackRetry          bool // a semaphore's give-back is not sent again after a failure that passes (permit.giveBack)
	noClaimRetry             bool // a semaphore's failed claim after its turn ends the acquisition, even for a failure that passes (permit.claimSlot)
	writersIgnoreReaders     bool // a writer waits only for the writers queued before it (ticket.blockers)
	unconditionalMove        bool // the minimum hold's move skips its compare of the key's create revision (Lock.releaseKey)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

func defaultOptions() options {
	return options{ttl: 30 * time.Second, prefix: "/fencelock/", cleanupTimeout: 5 * time.Second, owner: defaultOwner(),
		meterProvider: otel.GetMeterProvider(), tracerProvider: otel.GetTracerProvider()}
}

// WithTTL sets the TTL requested for the client's session lease. etcd may
// grant more (it raises TTLs below its minimum, 1.5 election timeouts rounded
// up to a second: 2 s with default server settings); the granted TTL is what
// the client uses and reports ([Lock.TTL]). Sub-second values round up to
// whole seconds. Default 30 s. Non-positive values, and values over etcd's
// longest lease TTL ([MaxTTL]), make [New] fail.
//
// Choose several times the p99 of the work done under the lock: a short TTL
// frees the lock sooner after a crash, but expires more easily in a pause.
func WithTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.ttl = d }) }

// MaxTTL is the longest session TTL accepted ([WithTTL]): etcd's longest
// lease TTL, 9,000,000,000 s (about 285 years), which it refuses to exceed.
const MaxTTL = 9_000_000_000 * time.Second

// WithPrefix sets the key prefix under which every key of the client lives:
// a lock named n keeps its queue under prefix+"lock/"+e+"/", an election
// named n under prefix+"elect/"+e+"/", a semaphore named n under
// prefix+"sem/"+e+"/", where e is n with '%' spelled %25 and '/' spelled
// %2F (tenant%2F42 for tenant/42), and the session's lane markers live
// under prefix+"slot/". Default "/fencelock/".
// A '/' is appended when missing. Empty makes [New] fail.
//
// A prefix may not contain "lock", "elect", "slot" or "sem" as a segment
// ("/app/lock/" is refused, "/app/locks/" is fine): such a prefix nests
// inside the key space of a Client whose prefix is the part before that
// segment ("/app/"), whose queues would then hold its keys. Two Clients
// whose prefixes are otherwise nested ("/app/" and "/app/jobs/") share no
// key.
//
// With etcd authentication on, the client's role needs readwrite on the
// whole prefix, not only on prefix+"lock/" (every create reads a lane
// marker); for the default prefix:
//
//	etcdctl role grant-permission ROLE readwrite /fencelock/ --prefix
//
// Without it, Lock and TryLock fail with a [*PermissionError] naming the
// prefix.
func WithPrefix(p string) Option { return optionFunc(func(o *options) { o.prefix = p }) }

// WithCleanupTimeout bounds the requests the client makes after the caller's
// context has ended: deleting the key of an acquisition that was cancelled,
// and revoking the lease in [Client.Close]. Default 5 s. Non-positive values
// make [New] fail.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.cleanupTimeout = d })
}

// WithOwner sets the owner identity written into every key the client
// creates, for waiters, operators ([Client.Inspect], [LockedError]) and
// logs to read: a service, pod or host name. Default "hostname/pid". Empty,
// longer than [MaxOwnerLen] or not UTF-8 makes [New] fail. Nothing reads it
// for safety: two clients with one owner still exclude each other.
func WithOwner(owner string) Option { return optionFunc(func(o *options) { o.owner = owner }) }

// WithIssuer names the source of the client's fencing tokens: every
// [Lock], [Term] and [Partition] it hands out is then a
// [fence.IssuerNamer] with this name, and a [fence.Guard] over one passes
// it with each write, so that the stores that check issuers
// ([fence.MemoryStore], fence/postgres's Store with its issuer column)
// refuse, with [fence.ErrIssuerMismatch], tokens of another source on a
// key that has accepted this one's, and this one's on a key of another.
// Name the etcd cluster's role ("orders-etcd"), the same in every Client
// of the cluster; two clusters, or one and another lock service, fencing
// one resource need two names.
//
// Default: none, and floors written without a name keep working with a
// name given later. The name is not derived from the cluster's ID: a
// cluster restored from a snapshot gets a new one, while docs/restore.md's
// revision bump keeps its tokens comparable with the old cluster's, so a
// name from the ID would refuse every write after a restore. An empty
// name, or one that is not UTF-8, makes [New] fail.
func WithIssuer(name string) Option {
	return optionFunc(func(o *options) { o.issuer, o.hasIssuer = name, true })
}

// WithMeterProvider sets the OpenTelemetry meter provider the client's
// metrics go to. Default: the global one (otel.GetMeterProvider), which
// records nothing until the application installs an SDK. nil makes [New]
// fail. The metrics (fencelock.writes and fencelock.write.duration among
// them) are listed in the package documentation.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meterProvider = mp })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the spans
// of every acquisition and release (etcdlock.Lock, TryLock, RLock,
// TryRLock, Acquire, TryAcquire, Campaign, Join, Partition, Unlock, Resign,
// Leave, Handoff), and of the writes a [fence.Guard] refuses
// (guard.write). Default: the global one
// (otel.GetTracerProvider). nil makes [New] fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracerProvider = tp })
}

// WithLogger sets the logger for the client's events: acquisitions and
// releases at debug level, losses, failed releases, lost sessions and
// writes a [fence.Guard] refused at warn, each with the lock's name,
// token, lease and cause. Default: none
// (nothing is logged).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithNameAttribute adds the name acquired (of any kind) as an attribute
// (fencelock.name) to the client's metrics. Default off: names are
// unbounded, and every distinct name makes a new time series. Spans always
// carry the name.
func WithNameAttribute(on bool) Option { return optionFunc(func(o *options) { o.nameAttribute = on }) }

func (o *options) validate() error {
	if err := validateOwner(o.owner); err != nil {
		return err
	}
	switch {
	case o.ttl <= 0 || o.ttl > MaxTTL:
		return fmt.Errorf("%w: TTL %v is not in (0, %v]", ErrInvalidOption, o.ttl, MaxTTL)
	case o.prefix == "":
		return fmt.Errorf("%w: empty prefix", ErrInvalidOption)
	case o.hasIssuer && (o.issuer == "" || !utf8.ValidString(o.issuer)):
		return fmt.Errorf("%w: issuer %q is empty or not UTF-8: name the cluster's role, as \"orders-etcd\"", ErrInvalidOption, o.issuer)
	case o.cleanupTimeout <= 0:
		return fmt.Errorf("%w: cleanup timeout %v is not positive", ErrInvalidOption, o.cleanupTimeout)
	case nilcheck.IsNil(o.meterProvider) || nilcheck.IsNil(o.tracerProvider):
		return fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	}
	if !strings.HasSuffix(o.prefix, "/") {
		o.prefix += "/"
	}
	for _, seg := range layoutSegments {
		if i := strings.Index(o.prefix, "/"+seg+"/"); i >= 0 {
			return fmt.Errorf("%w: prefix %q nests inside the key space of a Client with prefix %q (its %s/ keys): choose a prefix with no %q segment",
				ErrInvalidOption, o.prefix, o.prefix[:i+1], seg, seg)
		}
	}
	return nil
}

// ttlSeconds is the TTL to request, rounded up to whole seconds.
func (o *options) ttlSeconds() int64 {
	return int64((o.ttl + time.Second - 1) / time.Second)
}

// LockOption configures one acquisition ([Client.Lock], [Client.TryLock]).
type LockOption interface {
	applyLock(*lockOptions)
}

type lockOptions struct {
	metadata string
	noWatch  bool
	shared   bool
	minHold  time.Duration // WithMinHold
	wait     time.Duration // WithWait; 0: ctx alone bounds the wait
	waitSet  bool
}

type lockOptionFunc func(*lockOptions)

func (f lockOptionFunc) applyLock(o *lockOptions) { f(o) }

// WithMetadata stores data with the acquisition's key, for waiters and
// operators to read ([Client.Inspect], [LockedError]): a job ID, a reason.
// At most [MaxDataLen] bytes; longer makes Lock and TryLock fail with
// [ErrInvalidData] before any request. Default none.
func WithMetadata(data string) LockOption {
	return lockOptionFunc(func(o *lockOptions) { o.metadata = data })
}

// WithoutKeyWatch holds the lock without watching its key. Done then
// closes when the session is lost (the lease expired, the validity deadline
// passed, the Client was closed) and on Unlock, but not when someone else
// deletes the key ([Client.Break], etcdctl del), nor, in one case, when
// someone else revokes the lease: should a copy of the session's grant
// request arrive after the revoke (held up on a connection that recovers
// later), etcd grants the lease again under its ID, and the session's
// keepalives renew it. The holder learns of either only from Unlock's error and from the fenced writes the resource refuses
// once a newer holder wrote. A watched lock costs an etcd watcher from 50 ms
// after its acquisition (on the Client's one watch stream: no goroutine)
// and about 1.5 KB of memory in this process; an unwatched one no watcher
// and about 1.2 KB (see BENCHMARKS.md, "Scale"). Use it when keys are only
// deleted by their holders and etcd's watchers are to be spared. Fencing is
// unaffected.
func WithoutKeyWatch() LockOption {
	return lockOptionFunc(func(o *lockOptions) { o.noWatch = true })
}

// WithWait bounds only the wait for the lock: an acquisition ([Client.Lock],
// [Client.Do], [Client.LockAll], [Client.Semaphore]'s Acquire) that has not
// got the lock after d gives up, leaving no key behind, with an error
// matching [context.DeadlineExceeded]; once the lock is held, d no longer
// counts, so [Client.Do]'s ctx can be left without a deadline for the
// work while the wait is bounded (bound the wait, not the work). d must be
// positive; the default is no bound but ctx's.
func WithWait(d time.Duration) LockOption {
	return lockOptionFunc(func(o *lockOptions) { o.wait = d; o.waitSet = true })
}

// noWait undoes a WithWait before it: LockAll bounds the wait for the
// whole set once, not each Lock of it again with a timer of its own.
var noWait = lockOptionFunc(func(o *lockOptions) { o.wait, o.waitSet = 0, false })

// waitContext is ctx bounded by WithWait's d, if set.
func (o *lockOptions) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.wait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, o.wait)
}

// waited says why an acquisition ended when its WithWait bound did, and not
// its caller's ctx.
func (o *lockOptions) waited(ctx, wctx context.Context, name string, err error) error {
	if err == nil || o.wait <= 0 || ctx.Err() != nil || wctx.Err() == nil {
		return err
	}
	return fmt.Errorf("etcdlock: %q: not acquired within %v (WithWait): %w", name, o.wait, err)
}

// Shared takes the lock as a reader: [Client.Lock], [Client.TryLock] and
// [Client.Do] given it behave as [Client.RLock] and [Client.TryRLock].
func Shared() LockOption { return lockOptionFunc(func(o *lockOptions) { o.shared = true }) }

func lockOptionsOf(opts []LockOption) (lockOptions, error) {
	if len(opts) == 0 {
		return lockOptions{}, nil // the defaults, which are valid: spares o's allocation
	}
	var o lockOptions // on the heap: applyLock, an interface's method, takes its address
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil LockOption", ErrInvalidOption)
		}
		opt.applyLock(&o)
	}
	if o.waitSet && o.wait <= 0 {
		return o, fmt.Errorf("%w: WithWait(%v): the bound must be positive", ErrInvalidOption, o.wait)
	}
	if err := o.checkMinHold(); err != nil {
		return o, err
	}
	return o, validateData("metadata", o.metadata)
}

// MaxMinHold is the longest minimum hold [WithMinHold] accepts: a year.
const MaxMinHold = 366 * 24 * time.Hour

// WithMinHold keeps the lock's key in etcd until at least d after the
// acquisition (measured from when Lock or TryLock returned it), as
// ShedLock's lockAtLeastFor does, so that a job scheduled on several
// machines runs once per period even when it takes a millisecond and the
// machines' clocks differ by less than d. Default 0: none.
//
// [Lock.Unlock] still returns at once, and [Lock.Done] closes: what stays is
// the key. An Unlock before d has passed moves the key, with its create
// revision and value, onto a lease of its own whose TTL covers the time
// left (rounded up to whole seconds), in a transaction that compares the
// key's create revision with the token, so it never touches another
// acquisition's key; the next waiter then gets the lock when that lease
// expires, and a later holder's token is still greater. The key outlives
// the Client's session: [Client.Close] and the end of the process after
// Unlock leave it in place until its lease expires. An Unlock after d
// deletes the key, as without the option. [Lock.UnlockNow] releases
// without the hold, for work that never began.
//
// The minimum hold starts with Unlock: a process that dies, or a Client
// closed, while the lock is held frees the lock when the session's lease
// goes (at once on Close, within the TTL after a crash), so a crashed job
// can run again elsewhere. If the move fails (etcd unreachable or out of
// space), Unlock returns the error and keeps trying in the background, as
// a failed release does; the key stays on the session's lease meanwhile,
// and once d has passed the retry deletes it. Done closes once the move
// (or the deletion) has landed; a Client closed before then revokes the
// session's lease, and the key with it.
//
// It applies to [Client.Lock], [Client.TryLock], [Client.RLock],
// [Client.TryRLock], [Client.Do] and each lock of [Client.LockAll] (a
// LockAll that fails releases the locks it took at once, without the
// hold: its caller never got them); a
// [Semaphore], whose permit is a second key, refuses it with
// [ErrInvalidOption]. Negative d, or d over [MaxMinHold], makes the call
// fail with [ErrInvalidOption] before any request.
func WithMinHold(d time.Duration) LockOption {
	return lockOptionFunc(func(o *lockOptions) { o.minHold = d })
}

// checkMinHold validates the option of [WithMinHold].
func (o *lockOptions) checkMinHold() error {
	if o.minHold < 0 || o.minHold > MaxMinHold {
		return fmt.Errorf("%w: minimum hold %v is not in [0, %v]", ErrInvalidOption, o.minHold, MaxMinHold)
	}
	return nil
}
