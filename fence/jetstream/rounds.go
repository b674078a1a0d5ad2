package jsfence

import (
	"context"

	"github.com/fencelock/fencelock/fence"
)

// rounds is a Store's [fence.UpdateRounds]: its Update is fence's loop
// over them. Each round reads the entry, claims it (writes it back with
// token, when its token is lower), and writes fn's result on the claim's
// revision; a round that met another writer waits before the next
// ([backoff]).
type rounds Store

// StartUpdate starts an Update's span.
func (r *rounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdate).StartUpdate(ctx, key, token)
}

// ClaimRead reads the entry, refuses a higher token, and claims it unless
// its token is token already; it returns the revision fn's write is
// conditional on.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, uint64, error) {
	s := (*Store)(r)
	e, err := s.read(ctx, key)
	if err != nil {
		return fence.Record{}, 0, err
	}
	if e.rev != 0 && e.token > token {
		return fence.Record{}, 0, &fence.StaleError{Resource: key, Token: token, Current: e.token}
	}
	rev := e.rev
	if e.rev == 0 || e.token < token {
		w, err := s.writeIf(ctx, opGetForUpdate, key, e.rev, token, !e.found(), e.value)
		switch {
		case err != nil:
			return fence.Record{}, 0, err
		case !w.ok:
			return fence.Record{}, 0, fence.ErrChanged
		}
		rev = w.rev
	}
	if !e.found() {
		return fence.Record{}, rev, nil
	}
	return fence.Record{Token: token, Value: e.value}, rev, nil
}

// WriteIf writes v with token on revision rev.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, rev uint64, v []byte) error {
	s := (*Store)(r)
	w, err := s.writeIf(ctx, opUpdate, key, rev, token, false, v)
	if w.ok || err != nil {
		return err
	}
	// Refused: by another write, or by this one's first copy if it was
	// delivered twice (its id is then in the entry).
	if e, err := s.read(ctx, key); err == nil && e.rev != 0 && e.id == w.id && !s.noRecognise {
		return nil
	}
	return fence.ErrChanged
}

// WaitUpdate waits before the next round, as Put's loop does.
func (r *rounds) WaitUpdate(ctx context.Context, key string, round int) error {
	return backoff(ctx, key, round)
}

// UpdateConflict is the error of an Update whose key kept changing.
func (r *rounds) UpdateConflict(key string, token fence.Token, _ error) error {
	return conflictError(key, token)
}
