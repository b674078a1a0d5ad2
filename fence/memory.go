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
	recs map[string]Record
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

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
	cur, ok := m.recs[key]
	if ok && token < cur.Token {
		return &StaleError{Resource: key, Token: token, Current: cur.Token}
	}
	if m.recs == nil {
		m.recs = make(map[string]Record)
	}
	m.recs[key] = Record{Value: bytes.Clone(value), Token: token}
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
	r, ok := m.recs[key]
	if !ok {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return Record{Value: bytes.Clone(r.Value), Token: r.Token}, nil
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

var _ Store = (*MemoryStore)(nil)
