package azblobfence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// rounds is a Store's [fence.UpdateRounds]: its Update is fence's loop
// over them. Each round claims the key as GetForUpdate does, and writes
// fn's result on the ETag of the blob the claim read or wrote; a round
// that met another writer waits before the next ([backoff]).
type rounds Store

// StartUpdate starts an Update's span.
func (r *rounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdate).StartUpdate(ctx, key, token)
}

// ClaimRead is the claim, after the Store's check of the server; it
// returns the version fn's write is conditional on.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, version, error) {
	s := (*Store)(r)
	if err := s.ensureChecked(ctx); err != nil {
		return fence.Record{}, version{}, err
	}
	return s.claim(ctx, key, token)
}

// WriteIf writes value with token on v's ETag.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, v version, value []byte) error {
	s := (*Store)(r)
	if err := checkSize(key, value); err != nil {
		return err // fn's value, not sent; the claim stays
	}
	w := version{token: token, id: newWriteID()}
	refused, err := s.attempt(ctx, key, &w, value, v)
	if !refused {
		return err
	}
	// Refused: by another write, or by this one's first copy, delivered
	// twice (its id is then in the blob's metadata). Without the read
	// back there is no telling: another round would apply fn again over
	// a write of fn's that may have landed.
	got, rerr := s.head(ctx, key)
	switch {
	case rerr != nil:
		return &fence.UnknownOutcomeError{Resource: key, Token: token, Err: fmt.Errorf("refused (%w), then reading back: %w", err, rerr)}
	case got.landed(w):
		return nil
	}
	return changed{err}
}

// WaitUpdate waits before the next round, as Put's loop does.
func (r *rounds) WaitUpdate(ctx context.Context, key string, round int) error {
	return backoff(ctx, key, round)
}

// UpdateConflict is the error of an Update whose blob kept changing.
func (r *rounds) UpdateConflict(key string, token fence.Token, _ error) error {
	return conflictError(key, token)
}
