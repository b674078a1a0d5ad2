package s3fence

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// maxKeyLen is S3's limit on the length of an object key, in bytes.
const maxKeyLen = 1024

// Store is a [fence.Store] whose records are objects in one S3 bucket: Put
// is a fenced write made safe by S3's conditional PUTs, Get a plain read.
// It is a [fence.Updater] too: GetForUpdate is the read to make before a
// write, which claims the key for the reader's token, and Update a
// read-modify-write. See the package documentation for how, and for the
// object format.
//
// A Store is safe for concurrent use, by any number of goroutines and
// processes: the S3 server, not the Store, decides every write. The zero
// Store is not usable (its methods fail with [ErrInvalidArgument]); create
// one with [New].
type Store struct {
	client Client
	bucket string
	opts   options
	cache  *versionCache
	check  *checkState // conditional PutObject
	// mpCheck: conditional CompleteMultipartUpload
	mpCheck *checkState
	tel     *storeTelemetry
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// New returns a Store that keeps its objects in bucket, through client. It
// does no I/O: a missing bucket or bad credentials show up as errors
// matching [ErrNoSuchBucket] or [ErrAccessDenied] on first use, and a server
// that ignores conditional writes as [ErrConditionalUnsupported] on the first
// write (see [Store.CheckConditionalWrites]). It fails, before any I/O, if
// client is nil (a typed nil too) or bucket is empty (an error matching
// [ErrInvalidArgument]), or an option is invalid ([ErrInvalidOption]).
func New(client Client, bucket string, opts ...Option) (*Store, error) {
	if nilcheck.IsNil(client) {
		return nil, fmt.Errorf("%w: New: nil client (%T)", ErrInvalidArgument, client)
	}
	if bucket == "" {
		return nil, fmt.Errorf("%w: New: empty bucket name", ErrInvalidArgument)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	tel, err := newStoreTelemetry(o.meters, o.tracers)
	if err != nil {
		return nil, fmt.Errorf("s3fence: New: creating instruments: %w", err)
	}
	return &Store{client: client, bucket: bucket, opts: o, cache: newVersionCache(o.cacheSize), check: newCheckState(), mpCheck: newCheckState(), tel: tel}, nil
}

// Bucket returns the name of the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// checkCall validates the Store, a key and the context before any I/O.
func (s *Store) checkCall(ctx context.Context, key string) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	return checkCtx(ctx)
}

// ready validates the Store and the context before any I/O.
func (s *Store) ready(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	return checkCtx(ctx)
}

// usable refuses a nil or zero Store, which would otherwise panic.
func (s *Store) usable() error {
	if s == nil || s.tel == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	return nil
}

// checkKey refuses keys S3 does not accept.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	case len(key) > maxKeyLen:
		return fmt.Errorf("%w: key of %d bytes (S3 allows %d)", fence.ErrInvalidKey, len(key), maxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", fence.ErrInvalidKey, key)
	}
	return nil
}

// checkCtx refuses a nil context with an error rather than a panic, as every
// entry point must, and returns the context's error if it has ended.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}
