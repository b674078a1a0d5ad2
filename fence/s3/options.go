package s3fence

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures a [Store]. Options are created by the With… functions
// of this package; the interface is sealed. An option only records its
// value: [New] checks them all and fails, with an error matching
// [ErrInvalidOption], on the first invalid one.
type Option interface {
	apply(*options)
}

type options struct {
	maxAttempts int
	cacheSize   int
	retryDelay  time.Duration
	putGrace    time.Duration
	check       bool
	probeKey    string
	putDefaults []PutOption
	bucketOwner *string         // nil: not set
	sseKey      []byte          // WithSSECustomerKey's key
	sseSet      bool            // WithSSECustomerKey was given
	sse         *sseCustomerKey // the key checked and encoded; nil: none
	threshold   int64           // objects larger go multipart
	partSize    int64
	meters      metric.MeterProvider // nil: the global one
	tracers     trace.TracerProvider // nil: the global one
	nilProvider bool                 // a provider option was given nil
}

func defaultOptions() options {
	return options{maxAttempts: 10, cacheSize: 1024, retryDelay: 5 * time.Millisecond, putGrace: 10 * time.Second,
		check: true, probeKey: DefaultProbeKey, threshold: maxPutSize, partSize: defaultPartSize}
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithMaxAttempts sets how many conditional PUTs one [Store.Put] may send
// while other writers keep changing the object under it (412
// PreconditionFailed, 409 ConditionalRequestConflict) before it gives up with
// an error matching [ErrConflict]. The default is 10. n must be at least 1.
func WithMaxAttempts(n int) Option { return optionFunc(func(o *options) { o.maxAttempts = n }) }

// WithCacheSize sets how many keys a [Store] remembers the ETag and token of
// (the last version it wrote or read), so that a holder's repeated writes to
// a key send one conditional PUT instead of a read and a PUT. The least
// recently used key is forgotten first. The default is 1024; 0 disables the
// cache; n must not be negative.
func WithCacheSize(n int) Option { return optionFunc(func(o *options) { o.cacheSize = n }) }

// WithRetryDelay sets the base of the randomised, exponentially growing wait
// between conditional PUTs that conflicted with another writer (at most 64
// times d). The default is 5ms; 0 retries at once; d must not be negative.
func WithRetryDelay(d time.Duration) Option { return optionFunc(func(o *options) { o.retryDelay = d }) }

// WithPutGrace sets how long a PUT that is already under way may go on after
// the caller's context ends. The default is 10s. 0 abandons the PUT as soon
// as the context ends; d must not be negative.
//
// The rule, for every write of a Store ([Store.Put], [Store.PutWith],
// [Store.Delete]): a PUT is not abandoned the moment the context ends,
// because an abandoned PUT can still land after the call has returned,
// leaving the caller with an unknown outcome and a record that changes
// later. The call waits up to d for the server's answer instead. If none
// comes in time, it returns an error matching [fence.ErrUnknownOutcome]: the
// object holds the old version or the new one, whole, and the new one may
// still appear later.
func WithPutGrace(d time.Duration) Option { return optionFunc(func(o *options) { o.putGrace = d }) }

// WithConditionalCheck sets whether a [Store] runs
// [Store.CheckConditionalWrites] before its first write, and refuses to
// write if the server does not honour conditional writes. The default is
// true. Turn it off only when something else guarantees them (a bucket policy
// that denies unconditional PUTs does not: it cannot tell a server that
// ignores the headers) or the probe's three PUTs per Store are unwelcome. A
// verdict from an explicit call to CheckConditionalWrites is kept either way.
func WithConditionalCheck(enabled bool) Option {
	return optionFunc(func(o *options) { o.check = enabled })
}

// WithProbeKey sets the key of the object [Store.CheckConditionalWrites]
// writes: one the credentials may write, outside the keys holding fenced
// records. The default is [DefaultProbeKey]. key must be a valid S3 key (not
// empty, at most 1024 bytes of UTF-8).
func WithProbeKey(key string) Option { return optionFunc(func(o *options) { o.probeKey = key }) }

// WithPutDefaults sets PutOptions for every write of a [Store] ([Store.Put],
// [Store.PutWith], the tombstones of [Store.Delete]); a PutWith call's own
// options come after them. Default: none. A nil or invalid PutOption makes
// [New] fail: New applies them once, to a scratch request, to check them.
func WithPutDefaults(opts ...PutOption) Option {
	return optionFunc(func(o *options) { o.putDefaults = append(o.putDefaults, opts...) })
}

// WithExpectedBucketOwner makes every request of a [Store] (reads, writes,
// the conditional-write check) carry the expected bucket owner's account
// ID, so that S3 refuses it (403, [ErrAccessDenied]) if the bucket belongs
// to another account. Default: not sent. id must not be empty.
func WithExpectedBucketOwner(id string) Option {
	return optionFunc(func(o *options) { o.bucketOwner = &id })
}

// WithMultipartThreshold sets the size above which a write's object (the
// value and the [HeaderSize]-byte envelope) is sent as a fenced multipart
// upload (see [Store.PutReader]) rather than one PutObject. The default,
// and the largest allowed, is 5 GiB, the most one PutObject may carry; the
// smallest is 5 MiB.
func WithMultipartThreshold(n int64) Option { return optionFunc(func(o *options) { o.threshold = n }) }

// WithPartSize sets the size of the parts of a multipart upload (see
// [Store.PutReader]); the last part may be smaller. The default is 64 MiB;
// n must be between 5 MiB and 5 GiB, S3's limits. A write whose object
// would need more than 10,000 parts (S3's limit) uses larger parts.
func WithPartSize(n int64) Option { return optionFunc(func(o *options) { o.partSize = n }) }

// WithMeterProvider sets the OpenTelemetry meter provider for the store's
// metrics: fencelock.writes and fencelock.write.duration (attributes
// fencelock.adapter "s3", fencelock.operation "put" or "delete",
// fencelock.outcome accepted, stale, unknown or error),
// fencelock.s3.rereads (reads of an object after a refused conditional
// PUT) and fencelock.s3.conflicts (conditional PUTs refused, 412 or 409).
// Default: the global provider (otel.GetMeterProvider), which records
// nothing until the application installs an SDK. nil makes [New] fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span of
// each Put, PutWith and Delete (s3.put, s3.delete; children of the
// caller's context, with the key and token as attributes). Default: the
// global provider. nil makes [New] fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

// validate checks the recorded options, once, in [New].
func (o *options) validate() error {
	switch {
	case o.nilProvider:
		return fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	case o.maxAttempts < 1:
		return fmt.Errorf("%w: WithMaxAttempts(%d): must be at least 1", ErrInvalidOption, o.maxAttempts)
	case o.cacheSize < 0:
		return fmt.Errorf("%w: WithCacheSize(%d): must not be negative", ErrInvalidOption, o.cacheSize)
	case o.retryDelay < 0:
		return fmt.Errorf("%w: WithRetryDelay(%v): must not be negative", ErrInvalidOption, o.retryDelay)
	case o.putGrace < 0:
		return fmt.Errorf("%w: WithPutGrace(%v): must not be negative", ErrInvalidOption, o.putGrace)
	case o.bucketOwner != nil && *o.bucketOwner == "":
		return fmt.Errorf("%w: WithExpectedBucketOwner: empty account ID", ErrInvalidOption)
	}
	if err := o.validateMultipart(); err != nil {
		return err
	}
	if o.sseSet {
		var err error
		if o.sse, err = newSSECustomerKey(o.sseKey); err != nil {
			return err
		}
	}
	if err := checkKey(o.probeKey); err != nil {
		return fmt.Errorf("%w: WithProbeKey: %w", ErrInvalidOption, err)
	}
	// A dry run finds a nil or invalid default now rather than at every write.
	_, err := applyPutOptions(o.putDefaults)
	return err
}
