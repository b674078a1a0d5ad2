package s3fence

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Option configures a [Store]. Options are created by the With… functions
// of this package; the interface is sealed.
type Option interface {
	apply(*options) error
}

type options struct {
	maxAttempts int
	cacheSize   int
	retryDelay  time.Duration
	putGrace    time.Duration
	check       bool
	probeKey    string
	putDefaults []PutOption
	bucketOwner string
}

func defaultOptions() options {
	return options{maxAttempts: 10, cacheSize: 1024, retryDelay: 5 * time.Millisecond, putGrace: 10 * time.Second,
		check: true, probeKey: DefaultProbeKey}
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

// WithMaxAttempts sets how many conditional PUTs one [Store.Put] may send
// while other writers keep changing the object under it (412
// PreconditionFailed, 409 ConditionalRequestConflict) before it gives up with
// an error matching [ErrConflict]. The default is 10. n must be at least 1.
func WithMaxAttempts(n int) Option {
	return optionFunc(func(o *options) error {
		if n < 1 {
			return fmt.Errorf("s3fence: WithMaxAttempts(%d): must be at least 1", n)
		}
		o.maxAttempts = n
		return nil
	})
}

// WithCacheSize sets how many keys a [Store] remembers the ETag and token of
// (the last version it wrote or read), so that a holder's repeated writes to
// a key send one conditional PUT instead of a read and a PUT. The least
// recently used key is forgotten first. The default is 1024; 0 disables the
// cache; n must not be negative.
func WithCacheSize(n int) Option {
	return optionFunc(func(o *options) error {
		if n < 0 {
			return fmt.Errorf("s3fence: WithCacheSize(%d): must not be negative", n)
		}
		o.cacheSize = n
		return nil
	})
}

// WithRetryDelay sets the base of the randomised, exponentially growing wait
// between conditional PUTs that conflicted with another writer (at most 64
// times d). The default is 5ms; 0 retries at once; d must not be negative.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d < 0 {
			return fmt.Errorf("s3fence: WithRetryDelay(%v): must not be negative", d)
		}
		o.retryDelay = d
		return nil
	})
}

// WithPutGrace sets how long a PUT that is already under way may go on after
// the caller's context ends. An abandoned PUT can still land after Put has
// returned, which would leave the caller with an unknown outcome and a
// record that changes later; waiting for the server's answer avoids both.
// The default is 10s. 0 abandons the PUT as soon as the context ends; d must
// not be negative.
func WithPutGrace(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d < 0 {
			return fmt.Errorf("s3fence: WithPutGrace(%v): must not be negative", d)
		}
		o.putGrace = d
		return nil
	})
}

// WithConditionalCheck sets whether a [Store] runs
// [Store.CheckConditionalWrites] before its first write, and refuses to
// write if the server does not honour conditional writes. The default is
// true. Turn it off only when something else guarantees them (a bucket policy
// that denies unconditional PUTs does not: it cannot tell a server that
// ignores the headers) or the probe's three PUTs per Store are unwelcome. A
// verdict from an explicit call to CheckConditionalWrites is kept either way.
func WithConditionalCheck(enabled bool) Option {
	return optionFunc(func(o *options) error {
		o.check = enabled
		return nil
	})
}

// WithProbeKey sets the key of the object [Store.CheckConditionalWrites]
// writes: one the credentials may write, outside the keys holding fenced
// records. The default is [DefaultProbeKey]. key must be a valid S3 key (not
// empty, at most 1024 bytes of UTF-8).
func WithProbeKey(key string) Option {
	return optionFunc(func(o *options) error {
		if err := checkKey(key); err != nil {
			return fmt.Errorf("s3fence: WithProbeKey: %w", err)
		}
		o.probeKey = key
		return nil
	})
}

// WithPutDefaults sets PutOptions for every write of a [Store] ([Store.Put],
// [Store.PutWith], the tombstones of [Store.Delete]); a PutWith call's own
// options come after them. Default: none. A nil option makes New fail.
func WithPutDefaults(opts ...PutOption) Option {
	return optionFunc(func(o *options) error {
		if slices.Contains(opts, nil) {
			return errors.New("s3fence: WithPutDefaults: nil PutOption")
		}
		o.putDefaults = append(o.putDefaults, opts...)
		return nil
	})
}

// WithExpectedBucketOwner makes every request of a [Store] (reads, writes,
// the conditional-write check) carry the expected bucket owner's account
// ID, so that S3 refuses it (403, [ErrAccessDenied]) if the bucket belongs
// to another account. Default: not sent. id must not be empty.
func WithExpectedBucketOwner(id string) Option {
	return optionFunc(func(o *options) error {
		if id == "" {
			return errors.New("s3fence: WithExpectedBucketOwner: empty account ID")
		}
		o.bucketOwner = id
		return nil
	})
}
