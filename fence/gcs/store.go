package gcsfence

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/storage"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/tel"
)

const (
	opPut          = "put"
	opDelete       = "delete"
	opGetForUpdate = "get_for_update"
	opUpdate       = "update"
)

// Store is a [fence.Store] whose records are objects of one Google Cloud
// Storage bucket: resource key K is the object prefix+K ([WithPrefix]),
// which begins with a header holding the token ([HeaderSize]). Every write
// reads the object's generation and writes with ifGenerationMatch on it,
// so Cloud Storage, not the Store, decides between two writers; a
// generation never repeats, so a write cannot land on an object that
// changed and changed back. See the package documentation.
//
// A Store is safe for concurrent use. The zero Store is not usable; create
// one with [New].
type Store struct {
	bucket *storage.BucketHandle
	name   string
	prefix string
	tel    *tel.Recorder
	cache  *headers
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// New returns a Store on bucket, through c. It does no I/O. It fails,
// before any I/O, for a nil client or an empty bucket name
// ([ErrInvalidArgument]), or an invalid option ([ErrInvalidOption]).
func New(c *storage.Client, bucket string, opts ...Option) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: New: nil client", ErrInvalidArgument)
	}
	if bucket == "" {
		return nil, fmt.Errorf("%w: New: empty bucket name", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("gcs", "github.com/fencelock/fencelock/fence/gcs", o.meters, o.tracers, opPut, opDelete, opGetForUpdate, opUpdate)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Store{bucket: c.Bucket(bucket), name: bucket, prefix: o.prefix, tel: r, cache: newHeaders()}, nil
}

// Object returns the name of the object holding resource key.
func (s *Store) Object(key string) string {
	if s == nil {
		return key
	}
	return s.prefix + key
}

// Get returns the record under key, read whole: an error matching
// [fence.ErrNotFound] when there is none (never written, deleted, or only
// claimed; and for a bucket that does not exist, which a read cannot tell
// from a missing object), [ErrCorrupt] for an object this package did not
// write. It claims nothing.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	o, err := s.read(ctx, key, true)
	if err != nil {
		return fence.Record{}, err
	}
	if o.gen == 0 || o.none {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return fence.Record{Token: o.token, Value: o.value}, nil
}

// Put stores value under key with token, unless the object holds a higher
// token: then it returns a *[fence.StaleError] (Current is that token) and
// changes nothing. It reads the object's header and writes with
// ifGenerationMatch on the generation it read; when another writer got in
// between (412), it reads again, up to [fence.UpdateAttempts] times, then
// returns an error matching [fence.ErrConflict]. So a late write is
// refused by the generation it did not read, and then by the token.
//
// The write is sent once, with the library's retries off for it: when no
// answer comes (or a 5xx), the error matches [fence.ErrUnknownOutcome] and
// the object is the old one or the new one, whole. A 4xx is a refusal
// ([ErrNoBucket] for a bucket that does not exist). Bad arguments are
// refused before any I/O, as every Store's.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	return s.write(ctx, opPut, key, token, false, value)
}

// Delete removes the record under key, fenced like [Store.Put]: the object
// is replaced by a header with token and no record, so the floor stays and
// a later Put with a lower token is refused. Deleting the object by other
// means (or a lifecycle rule) removes the floor.
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	return s.write(ctx, opDelete, key, token, true, nil)
}

func (s *Store) write(ctx context.Context, what, key string, token fence.Token, none bool, value []byte) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	ctx, w := s.tel.Op(what).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	err := s.loop(ctx, what, key, token, false, func(o object) (bool, []byte, error) { return none, value, nil })
	w.End(err)
	return err
}

// loop reads key (its header, or all when all), refuses a higher token,
// and writes what next computes from what was read with token, if the
// generation is still the one read, trying again on a change.
func (s *Store) loop(ctx context.Context, what, key string, token fence.Token, all bool, next func(object) (none bool, value []byte, err error)) error {
	for attempt := range fence.UpdateAttempts {
		// The cached header serves only a write it would let through: a
		// refusal is the bucket's, read from it.
		o, cached := s.cache.get(key)
		cached = cached && !all && attempt == 0 && o.token <= token
		if !cached {
			var err error
			if o, err = s.read(ctx, key, all); err != nil {
				return err
			}
		}
		if o.gen != 0 && o.token > token {
			return &fence.StaleError{Resource: key, Token: token, Current: o.token}
		}
		none, value, err := next(o)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		_, ok, err := s.writeIf(ctx, what, key, o.gen, token, none, value)
		if ok || err != nil {
			return err
		}
		if cached {
			continue // the cache was behind another writer: read now, no race lost
		}
		if err := backoff(ctx, key, attempt+1); err != nil {
			return err
		}
	}
	return conflictError(key, token)
}

// conflictError is the error of a write whose object kept changing.
func conflictError(key string, token fence.Token) error {
	return fmt.Errorf("%w: %q with token %d: the object kept changing, %d attempts", fence.ErrConflict, key, token, fence.UpdateAttempts)
}

// GetForUpdate returns the record under key, claiming key for token (see
// [fence.Updater]): it reads the object, and unless its token is token
// already, writes it back with token (the same value) with
// ifGenerationMatch on the generation read, so from then on a write with
// a lower token is refused; a change in between makes it read again. A
// claim of an object with a large value writes it again: claim once, then
// read with Get. A key with no value is claimed with a header alone, and
// the error matches [fence.ErrNotFound]. Errors are those of Put.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	ctx, w := s.tel.Op(opGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	var err error
	var got object
	err = s.loop(ctx, opGetForUpdate, key, token, true, func(o object) (bool, []byte, error) {
		got = o
		if o.gen != 0 && o.token == token {
			return false, nil, errClaimed // claimed already: nothing to write
		}
		return o.gen == 0 || o.none, o.value, nil
	})
	if err == errClaimed {
		err = nil
	}
	if errors.Is(err, fence.ErrNotFound) {
		w.End(nil)
	} else {
		w.End(err)
	}
	if err != nil {
		return fence.Record{}, err
	}
	if got.gen == 0 || got.none {
		return fence.Record{}, fmt.Errorf("%w: %q (claimed with token %d)", fence.ErrNotFound, key, token)
	}
	return fence.Record{Token: token, Value: got.value}, nil
}

// errClaimed stops loop when the object holds the claim's token already.
var errClaimed = errors.New("gcsfence: claimed already")

// Update is a read-modify-write of key with token (see [fence.Updater]):
// it reads the object whole, refuses a higher token, calls fn with the
// record (the zero Record when there is none), and writes fn's result
// with token with ifGenerationMatch on the generation read, so that it
// lands only if nothing was written in between (a late older write, or a
// writer with the same token); on a change it reads and calls fn again, up
// to [fence.UpdateAttempts] times, then returns an error matching
// [fence.ErrConflict]. fn's error is returned as it is, and fn's value is
// not written, though the claim stays (the object rewritten with token);
// a panic is passed on. Other errors are those of Put. A copy of the final
// write delivered twice is told apart by the id in the header: Update
// does not call fn again for it.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}

// CheckPreconditions makes sure the server refuses a write whose
// ifGenerationMatch does not hold: it writes a fresh probe object (under
// the store's prefix, "fencelock-probe/…"), then writes it again on a
// generation that is not its own, and returns an error matching
// [ErrPreconditionsUnsupported] if that landed. Google's Cloud Storage
// always passes; run it once against a compatible server.
func (s *Store) CheckPreconditions(ctx context.Context) error {
	if err := s.checkCall(ctx, "fencelock-probe"); err != nil {
		return err
	}
	var b [8]byte
	_, _ = crand.Read(b[:])
	key := "fencelock-probe/" + hex.EncodeToString(b[:])
	if _, ok, err := s.writeIf(ctx, opPut, key, 0, 1, false, []byte("probe")); !ok || err != nil {
		return fmt.Errorf("gcsfence: precondition probe: first write: %v, %w", ok, err)
	}
	o, err := s.read(ctx, key, false)
	if err != nil {
		return fmt.Errorf("gcsfence: precondition probe: %w", err)
	}
	_, ok, err := s.writeIf(ctx, opPut, key, o.gen+1, 1, false, []byte("probe again"))
	if err != nil {
		return fmt.Errorf("gcsfence: precondition probe: %w", err)
	}
	if ok {
		return fmt.Errorf("%w: a write with ifGenerationMatch=%d landed on generation %d (probe %q)", ErrPreconditionsUnsupported, o.gen+1, o.gen, key)
	}
	return nil
}

func (s *Store) checkCall(ctx context.Context, key string) error {
	if s == nil || s.bucket == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	if key == "" {
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

func (s *Store) checkWrite(ctx context.Context, key string, token fence.Token) error {
	if token <= 0 {
		return fmt.Errorf("%w: token %d for %q", fence.ErrInvalidToken, token, key)
	}
	return s.checkCall(ctx, key)
}

// retryDelay is the base of the wait after a write lost a race (412).
const retryDelay = 5 * time.Millisecond

// backoff waits a random time up to retryDelay·2^(n-1), capped at
// 64·retryDelay, after the nth lost race, so that writers racing for one
// object spread out rather than lose together again.
func backoff(ctx context.Context, key string, n int) error {
	d := rand.N(retryDelay<<min(n-1, 6)) + 1
	select {
	case <-ctx.Done():
		return fmt.Errorf("gcsfence: %q: waiting to retry after a conflict: %w", key, ctx.Err())
	case <-time.After(d):
		return nil
	}
}
