package azblobfence

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

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

// maxNameLen is Azure's limit on a blob's name, in characters.
const maxNameLen = 1024

// MaxValueSize is the length, in bytes, of the largest value a Store
// writes: the most one Put Blob takes (5000 MiB, in Azure's API versions
// since 2019-12-12). A longer value is refused with [ErrTooLarge] before
// any I/O.
const MaxValueSize = 5000 << 20

// Store is a [fence.Store] whose records are block blobs of one Azure
// Blob Storage container: resource key K is the blob prefix+K
// ([WithPrefix]), its bytes the value and its metadata the token
// ([MetadataToken]). Every write is a Put Blob with If-Match on the ETag
// read (If-None-Match: * for a new blob), so Azure, not the Store,
// decides between two writers. See the package documentation.
//
// A Store is safe for concurrent use. The zero Store is not usable (its
// methods fail with [ErrInvalidArgument]); create one with [New].
type Store struct {
	// Set once, by New.
	c      Container
	name   string // the container's URL, for messages
	prefix string
	tel    *tel.Recorder
	cache  *versions
	check  *checkState
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// New returns a Store on the container c is a client of (a
// *container.Client). It does no I/O: a missing container shows up as
// [ErrNoContainer] on first use, and a server that ignores conditional
// headers as [ErrConditionalUnsupported] on the first write. It fails,
// before any I/O, for a nil client, a typed nil too
// ([ErrInvalidArgument]), or an invalid option ([ErrInvalidOption]).
func New(c Container, opts ...Option) (*Store, error) {
	if nilcheck.IsNil(c) {
		return nil, fmt.Errorf("%w: New: nil container client (%T)", ErrInvalidArgument, c)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("azblob", "github.com/fencelock/fencelock/fence/azblob", o.meters, o.tracers, opPut, opDelete, opGetForUpdate, opUpdate)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Store{c: c, name: c.URL(), prefix: o.prefix, tel: r, cache: newVersions(), check: newCheckState(o.check)}, nil
}

// Blob returns the name of the blob holding resource key.
func (s *Store) Blob(key string) string {
	if s == nil {
		return key
	}
	return s.prefix + key
}

func (s *Store) blob(key string) *blockblob.Client { return s.c.NewBlockBlobClient(s.prefix + key) }

// Get returns the record under key, read whole in one GET: an error
// matching [fence.ErrNotFound] when there is none (never written,
// deleted, or only claimed), [ErrNoContainer], or [ErrForeignBlob] for a
// blob this package did not write. It claims nothing.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	v, value, err := s.download(ctx, key)
	if err != nil {
		return fence.Record{}, err
	}
	if !v.hasValue() {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return fence.Record{Token: v.token, Value: value}, nil
}

// Put stores value under key with token, unless the blob holds a higher
// token: then it returns a *[fence.StaleError] (Current is that token)
// and changes nothing. It reads the blob's properties (unless this Store
// knows its ETag from its last write or read of key) and writes with
// If-Match on the ETag read (If-None-Match: * when there is no blob);
// when another writer got in between, it reads again, up to
// [fence.UpdateAttempts] times, then returns an error matching
// [fence.ErrConflict]. So a late write is refused by the ETag it did not
// read, and then by the token.
//
// The write is sent once, with the SDK's retries off for it. When no
// answer comes (or a 5xx), Put reads the blob back: if it holds this
// write, Put returns nil; otherwise the error matches
// [fence.ErrUnknownOutcome] (a *[fence.UnknownOutcomeError]) and the blob
// is the old one or the new one, whole; so does a read that fails after a
// refusal (the refusal may be of a copy of the write, delivered twice,
// after the first landed). Another error of the server's is
// a refusal, nothing written ([ErrNoContainer] for a container that does
// not exist, [ErrForeignBlob] for a blob this package did not write).
// Before a Store's first write it checks the server
// ([Store.CheckConditionalWrites]). Bad arguments are refused before any
// I/O, as every Store's, and so is a value longer than [MaxValueSize]
// ([ErrTooLarge]); ctx bounds the whole call.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	return s.write(ctx, opPut, key, token, false, value)
}

// Delete removes the record under key, fenced like [Store.Put]: the blob
// is replaced by an empty one with token and no record (MetadataKind
// "floor"), so the floor stays and a later Put with a lower token is
// refused. Deleting the blob by other means (or a lifecycle rule)
// removes the floor; copying an older snapshot or version over the blob
// (a restore) brings back its older token, and a write between the two
// then lands.
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	return s.write(ctx, opDelete, key, token, true, nil)
}

func (s *Store) write(ctx context.Context, op, key string, token fence.Token, floor bool, value []byte) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	if err := checkSize(key, value); err != nil {
		return err
	}
	ctx, tw := s.tel.Op(op).Start(ctx, token)
	if tw.Recording() {
		tw.SetResource(key)
	}
	err := s.ensureChecked(ctx)
	if err == nil {
		err = s.put(ctx, key, version{token: token, id: newWriteID(), floor: floor}, value)
	}
	tw.End(err)
	return err
}

// put is Put's loop: read (or take the cached version), decide, attempt.
// A refused attempt sends it back to a fresh read.
func (s *Store) put(ctx context.Context, key string, w version, value []byte) error {
	base, known := s.cache.get(key)
	known = known && base.token <= w.token // a refusal is the container's, read from it
	for attempt, contended := 0, 0; ; attempt++ {
		if !known {
			var err error
			base, err = s.head(ctx, key)
			switch {
			case err != nil && attempt > 0:
				// After a refusal, which may have been this write's
				// own copy, delivered twice, after the first landed.
				return &fence.UnknownOutcomeError{Resource: key, Token: w.token, Err: err}
			case err != nil:
				return err
			}
		}
		switch {
		case base.landed(w):
			return nil // this write landed: a copy of it was delivered twice
		case base.exists() && base.token > w.token:
			return &fence.StaleError{Resource: key, Token: w.token, Current: base.token}
		case attempt == fence.UpdateAttempts:
			return conflictError(key, w.token)
		}
		refusedNow, err := s.attempt(ctx, key, &w, value, base)
		if !refusedNow {
			return err
		}
		if !known {
			contended++ // a fresh read lost a race, not merely a stale cache entry
			if err := backoff(ctx, key, contended); err != nil {
				return err
			}
		}
		known = false
	}
}

// conflictError is the error of a write whose blob kept changing.
func conflictError(key string, token fence.Token) error {
	return fmt.Errorf("%w: %q with token %d: the blob kept changing, %d attempts", fence.ErrConflict, key, token, fence.UpdateAttempts)
}

func (s *Store) checkCall(ctx context.Context, key string) error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	switch n := utf8.RuneCountInString(s.prefix + key); {
	case key == "":
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", fence.ErrInvalidKey, key)
	case n > maxNameLen:
		return fmt.Errorf("%w: blob name of %d characters (Azure allows %d)", fence.ErrInvalidKey, n, maxNameLen)
	case strings.ContainsRune(s.prefix+key, '\\'):
		// Azure stores a backslash as a slash: `a\b` is the blob of "a/b".
		return fmt.Errorf("%w: blob name %q has a backslash, which Azure turns into a slash", fence.ErrInvalidKey, s.prefix+key)
	case endsBadly(s.prefix + key):
		return fmt.Errorf("%w: blob name %q ends in a slash or has a segment ending in a dot, which Azure's naming rules say to avoid", fence.ErrInvalidKey, s.prefix+key)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

func (s *Store) checkWrite(ctx context.Context, key string, token fence.Token) error {
	if err := s.checkCall(ctx, key); err != nil {
		return err
	}
	if token <= 0 {
		return fmt.Errorf("%w: token %d for %q", fence.ErrInvalidToken, token, key)
	}
	return nil
}

// endsBadly reports whether name is one Azure's naming rules say to
// avoid: it ends in a slash, or a path segment ends in a dot ("k.",
// "a/../b"). Azure may strip such a dot, making two keys one blob.
func endsBadly(name string) bool {
	if strings.HasSuffix(name, "/") {
		return true
	}
	for seg := range strings.SplitSeq(name, "/") {
		if strings.HasSuffix(seg, ".") {
			return true
		}
	}
	return false
}

// checkSize refuses a value longer than MaxValueSize, before it is sent.
func checkSize(key string, value []byte) error {
	if len(value) > MaxValueSize {
		return fmt.Errorf("%w: %q: %d bytes, more than %d", ErrTooLarge, key, len(value), MaxValueSize)
	}
	return nil
}
