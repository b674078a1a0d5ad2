package jsfence

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
)

const (
	opPut          = "put"
	opDelete       = "delete"
	opGetForUpdate = "get_for_update"
	opUpdate       = "update"
)

// KeyValue is the part of a JetStream key-value bucket a [Store] uses:
// a jetstream.KeyValue (from js.KeyValue or js.CreateKeyValue) is one.
type KeyValue interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
}

// Store is a [fence.Store] whose records are entries of one JetStream
// key-value bucket: resource key K is the bucket's key prefix+K
// ([WithPrefix]), whose value begins with a header holding the token
// ([HeaderSize]). Every write is conditional on the key's last revision
// (kv.Update, or kv.Create for a key with no entry), so the server, not
// the Store, decides between two writers. See the package documentation.
//
// A Store is safe for concurrent use. The zero Store is not usable; create
// one with [New].
type Store struct {
	// Set once by New.
	kv      KeyValue
	prefix  string
	timeout time.Duration
	tel     *tel.Recorder
	cache   *revisions // nil: WithoutRevisionCache
	// noRecognise turns off the recognition of the Store's own writes by
	// their ids (set before use, by the tests' controls only).
	noRecognise bool
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
	_ KeyValue      = jetstream.KeyValue(nil)
)

// New returns a Store on the bucket kv. It does no I/O: run
// [Store.CheckRevisions] once against a server you have not checked. It
// fails, before any I/O, for a nil kv ([ErrInvalidArgument]) or an
// invalid option ([ErrInvalidOption]).
func New(kv KeyValue, opts ...Option) (*Store, error) {
	if nilcheck.IsNil(kv) {
		return nil, fmt.Errorf("%w: New: nil KeyValue", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("jetstream", "github.com/fencelock/fencelock/fence/jetstream", o.meters, o.tracers, opPut, opDelete, opGetForUpdate, opUpdate)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	s := &Store{kv: kv, prefix: o.prefix, timeout: o.timeout, tel: r}
	if !o.noCache {
		s.cache = newRevisions()
	}
	return s, nil
}

// Key returns the bucket's key holding resource key.
func (s *Store) Key(key string) string {
	if s == nil {
		return key
	}
	return s.prefix + key
}

// Get returns the record under key: an error matching [fence.ErrNotFound]
// when there is none (never written, deleted, or only claimed),
// [ErrCorrupt] for an entry this package did not write. It claims
// nothing.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	e, err := s.read(ctx, key)
	if err != nil {
		return fence.Record{}, err
	}
	if !e.found() {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return fence.Record{Token: e.token, Value: e.value}, nil
}

// Put stores value under key with token, unless the key holds a higher
// token: then it returns a *[fence.StaleError] (Current is that token) and
// changes nothing. It writes on the key's last revision, as this Store
// last wrote or read it (one request), or as it reads it; when another
// writer got in between, the write is refused and Put reads again, up to
// [fence.UpdateAttempts] times, then returns an error matching
// [fence.ErrConflict]. So a late write is refused by the revision it did
// not read, and then by the token.
//
// When no answer comes to the write within the request timeout
// ([WithRequestTimeout]), Put reads the key, if ctx has not ended: if it
// holds this write (its id), Put returns nil; else the error matches
// [fence.ErrUnknownOutcome], and the key holds the old record or the new
// one, whole. A write to a bucket that no longer exists gives
// [ErrNoBucket]. Bad arguments are refused
// before any I/O, but for a value over the server's max_payload, which
// the client refuses before sending it, with an error matching
// [ErrInvalidArgument].
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	return s.write(ctx, opPut, key, token, false, value)
}

// Delete removes the record under key, fenced like [Store.Put]: the entry
// is replaced by a header with token and no record, so the floor stays
// and a later Put with a lower token is refused. Deleting or purging the
// key by other means (kv.Delete, kv.Purge, the bucket's MaxAge or
// history limits) removes the floor.
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
	err := s.loop(ctx, what, key, token, false, func(entry) (bool, []byte, error) { return none, value, nil })
	w.End(err)
	return err
}

// loop reads key (from the cache when fresh is false and it lets the
// write through), refuses a higher token, and writes what next computes
// from what was read with token, on the revision read, trying again on a
// change.
func (s *Store) loop(ctx context.Context, what, key string, token fence.Token, fresh bool, next func(entry) (none bool, value []byte, err error)) error {
	var sent uint64 // the id of the last write refused for a change
	for attempt := range fence.UpdateAttempts {
		// The cached header serves only a write it would let through: a
		// refusal is the bucket's, read from it.
		e, cached := s.cache.get(key)
		cached = cached && !fresh && attempt == 0 && e.token <= token
		if !cached {
			var err error
			if e, err = s.read(ctx, key); err != nil {
				return err
			}
		}
		if sent != 0 && e.rev != 0 && e.id == sent && !s.noRecognise {
			return nil // a copy of the write landed, and the refusal was another's answer
		}
		if e.rev != 0 && e.token > token {
			return &fence.StaleError{Resource: key, Token: token, Current: e.token}
		}
		none, value, err := next(e)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		w, err := s.writeIf(ctx, what, key, e.rev, token, none, value)
		if w.ok || err != nil {
			return err
		}
		sent = w.id
		if cached {
			continue // the cache was behind another writer: read now, no race lost
		}
		if err := backoff(ctx, key, attempt+1); err != nil {
			return err
		}
	}
	return conflictError(key, token)
}

// conflictError is the error of a write whose key kept changing.
func conflictError(key string, token fence.Token) error {
	return fmt.Errorf("%w: %q with token %d: the key kept changing, %d attempts", fence.ErrConflict, key, token, fence.UpdateAttempts)
}

// GetForUpdate returns the record under key, claiming key for token (see
// [fence.Updater]): it reads the entry and writes it back with token (the
// same value) on the revision read, so from then on a write with a lower
// token is refused; a change in between makes it read again. It writes
// even when the key holds token already: the write landing is what shows
// the read was the key's last, since on a replicated bucket a follower
// may answer a read before it has the last write. A key with no value is claimed with a
// header alone, and the error matches [fence.ErrNotFound]. Errors are
// those of Put.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	ctx, w := s.tel.Op(opGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	var got entry
	err := s.loop(ctx, opGetForUpdate, key, token, true, func(e entry) (bool, []byte, error) {
		got = e
		return !e.found(), e.value, nil
	})
	w.End(err)
	if err != nil {
		return fence.Record{}, err
	}
	if !got.found() {
		return fence.Record{}, fmt.Errorf("%w: %q (claimed with token %d)", fence.ErrNotFound, key, token)
	}
	return fence.Record{Token: token, Value: got.value}, nil
}

// Update is a read-modify-write of key with token (see [fence.Updater]):
// it reads the entry, refuses a higher token, claims the key (writes it
// back with token, when its token is lower), calls fn with the record (the
// zero Record when there is none), and writes fn's result with token on
// the claim's revision, so that it lands only if nothing was written in
// between (a late older write, or a writer with the same token); on a
// change it reads and calls fn again, up to [fence.UpdateAttempts] times,
// then returns an error matching [fence.ErrConflict]. fn's error is
// returned as it is, and fn's value is not written, though the claim
// stays; a panic is passed on. Other errors are those of Put. A copy of
// the final write delivered twice is told apart by the id in the header:
// Update does not call fn again for it.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}

func (s *Store) checkCall(ctx context.Context, key string) error {
	if s == nil || s.kv == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	if n := len(s.prefix + key); n > MaxKeyLen {
		return fmt.Errorf("%w: a key of %d bytes (with the prefix), more than %d", fence.ErrInvalidKey, n, MaxKeyLen)
	}
	if key == "" || !keyValid(s.prefix+key) {
		return fmt.Errorf("%w: %q: a bucket's key is letters, digits and -/_=. (no leading, trailing or double dot)", fence.ErrInvalidKey, s.prefix+key)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

func (s *Store) checkWrite(ctx context.Context, key string, token fence.Token) error {
	if err := token.Validate(); err != nil {
		return fmt.Errorf("jsfence: %q: %w", key, err)
	}
	if strings.HasSuffix(s.Key(key), ProbeKey) {
		// Some Store's probe key, whatever its prefix.
		return fmt.Errorf("%w: %q ends with ProbeKey, which CheckRevisions writes (a floor of token 1, whatever the key held)", fence.ErrInvalidKey, key)
	}
	return s.checkCall(ctx, key)
}

// retryDelay is the base of the wait after a write lost a race.
const retryDelay = 2 * time.Millisecond

// backoff waits a random time up to retryDelay·2^(n-1), capped at
// 64·retryDelay, after the nth lost race, so that writers racing for one
// key spread out rather than lose together again.
func backoff(ctx context.Context, key string, n int) error {
	d := rand.N(retryDelay<<min(n-1, 6)) + 1
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("jsfence: %q: waiting to retry after a conflict: %w", key, ctx.Err())
	case <-t.C:
		return nil
	}
}
