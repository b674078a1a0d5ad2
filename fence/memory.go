package fence

import (
	"bytes"
	"context"
	"fmt"
	"sync"
)

// MemoryStore is an in-process [Store] that obeys the fencing contract. It is
// the reference implementation the conformance suite is written against, and
// a resource for demos and tests. It keeps everything in memory.
//
// The zero MemoryStore is ready to use and safe for concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string]entry // guarded by mu
	// needIssuer refuses writes that name no issuer (RequireIssuer).
	needIssuer bool
}

// MemoryOption configures a [MemoryStore]. Create one with
// [RequireIssuer].
type MemoryOption interface{ applyMemory(*MemoryStore) }

type memoryOptionFunc func(*MemoryStore)

func (f memoryOptionFunc) applyMemory(m *MemoryStore) { f(m) }

// RequireIssuer makes a [MemoryStore] refuse every write (Put,
// GetForUpdate, Update, UpdateAll) whose context names no issuer, with
// an error matching [ErrIssuerRequired] that says what to add, changing
// nothing: a resource fenced by tokens of two sources cannot let a write
// that names none be compared with either. Default: a write that names
// none is compared by token alone, as before issuers.
func RequireIssuer() MemoryOption {
	return memoryOptionFunc(func(m *MemoryStore) { m.needIssuer = true })
}

// entry is a key's floor (rec.Token) and, when set, its value: a key
// claimed before it had a value keeps the floor alone.
type entry struct {
	rec     Record
	set     bool
	version uint64 // counts the key's changes, claims included
	issuer  string // of the tokens the key accepted ("": none named)
}

// NewMemoryStore returns an empty MemoryStore configured by opts (nil
// options are ignored).
func NewMemoryStore(opts ...MemoryOption) *MemoryStore {
	m := &MemoryStore{}
	for _, o := range opts {
		if o != nil {
			o.applyMemory(m)
		}
	}
	return m
}

// Put stores value under key if token is not lower than the highest token
// accepted for key; see [Store] for the contract.
func (m *MemoryStore) Put(ctx context.Context, key string, token Token, value []byte) error {
	if err := checkPut(key, token); err != nil {
		return err
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.admit(ctx, key, token, m.recs[key]); err != nil {
		return err
	}
	m.store(key, entry{rec: Record{Value: bytes.Clone(value), Token: token}, set: true, issuer: IssuerFromContext(ctx)})
	return nil
}

// admit refuses a write of token to key, whose entry is cur, for naming
// no issuer when m requires one ([ErrIssuerRequired]), for its issuer
// ([ErrIssuerMismatch]) or for staleness, in that order: tokens of two
// issuers are not compared.
func (m *MemoryStore) admit(ctx context.Context, key string, token Token, cur entry) error {
	if m.needIssuer {
		if _, err := NeedIssuer(ctx); err != nil {
			return fmt.Errorf("%w (MemoryStore, key %q)", err, key)
		}
	}
	if iss := IssuerFromContext(ctx); iss != "" && cur.issuer != "" && iss != cur.issuer {
		return fmt.Errorf("%w: %q has accepted tokens of %q; this write's token %d is of %q", ErrIssuerMismatch, key, cur.issuer, token, iss)
	}
	if token < cur.rec.Token {
		return &StaleError{Resource: key, Token: token, Current: cur.rec.Token}
	}
	return nil
}

// store sets key's entry; m.mu is held.
func (m *MemoryStore) store(key string, e entry) {
	if m.recs == nil {
		m.recs = make(map[string]entry)
	}
	e.version = m.recs[key].version + 1
	if e.issuer == "" { // a write that names none keeps the key's
		e.issuer = m.recs[key].issuer
	}
	m.recs[key] = e
}

// GetForUpdate returns the record for key after raising its floor to
// token, or an error matching [ErrNotFound] after raising it for a key
// with no value; a higher floor refuses it with [ErrStale]. See [Updater].
func (m *MemoryStore) GetForUpdate(ctx context.Context, key string, token Token) (Record, error) {
	if err := CheckRead(ctx, key, token); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claim(ctx, key, token)
}

// claim is GetForUpdate with m.mu held.
func (m *MemoryStore) claim(ctx context.Context, key string, token Token) (Record, error) {
	e := m.recs[key]
	if err := m.admit(ctx, key, token, e); err != nil {
		return Record{}, err
	}
	if iss := IssuerFromContext(ctx); token > e.rec.Token || iss != "" && e.issuer == "" {
		e.rec.Token, e.issuer = token, iss
		m.store(key, e)
	}
	if !e.set {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return Record{Value: bytes.Clone(e.rec.Value), Token: token}, nil
}

// Update claims key for token, passes its record to fn, and stores fn's
// result with token if the record has not changed since the read (fn runs
// without the store's lock, as it would against a server); else it tries
// again, up to [UpdateAttempts] times. It is [RunUpdate] over the store.
// See [Updater].
func (m *MemoryStore) Update(ctx context.Context, key string, token Token, fn UpdateFunc) error {
	return RunUpdate(ctx, (*memoryRounds)(m), key, token, fn)
}

// memoryRounds is a MemoryStore's [UpdateRounds] and [UpdateAllRounds].
type memoryRounds MemoryStore

// ClaimRead claims key and returns its record and its entry as read.
func (r *memoryRounds) ClaimRead(ctx context.Context, key string, token Token) (Record, entry, error) {
	m := (*MemoryStore)(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, err := m.claim(ctx, key, token)
	return rec, m.recs[key], err
}

// WriteIf stores v under key with token if key's entry is still seen.
func (r *memoryRounds) WriteIf(ctx context.Context, key string, token Token, seen entry, v []byte) error {
	m := (*MemoryStore)(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.recs[key]
	if err := m.admit(ctx, key, token, cur); err != nil {
		return err
	}
	if cur.version != seen.version {
		return ErrChanged
	}
	m.store(key, entry{rec: Record{Value: bytes.Clone(v), Token: token}, set: true, issuer: IssuerFromContext(ctx)})
	return nil
}

// Get returns the record for key, or an error matching [ErrNotFound].
func (m *MemoryStore) Get(ctx context.Context, key string) (Record, error) {
	if key == "" {
		return Record{}, fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if err := ctxErr(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.recs[key]
	if !e.set {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return Record{Value: bytes.Clone(e.rec.Value), Token: e.rec.Token}, nil
}

// checkPut validates a Put's arguments, as every adapter must before I/O.
func checkPut(key string, token Token) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	return token.Validate()
}

// ctxErr is ctx.Err, with an error rather than a panic for a nil ctx.
func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

var (
	_ Store   = (*MemoryStore)(nil)
	_ Updater = (*MemoryStore)(nil)
)
