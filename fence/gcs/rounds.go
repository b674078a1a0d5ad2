package gcsfence

import (
	"context"

	"github.com/fencelock/fencelock/fence"
)

// rounds is a Store's [fence.UpdateRounds]: its Update is fence's loop
// over them. Each round reads the object whole, claims it (writes it back
// with token, when its token is lower), and writes fn's result on the
// claim's generation; a round that met another writer waits before the
// next ([backoff]).
type rounds Store

// StartUpdate starts an Update's span.
func (r *rounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdate).StartUpdate(ctx, key, token)
}

// ClaimRead reads the object whole, refuses a higher token, and claims it
// unless its token is token already; it returns the generation fn's
// write is conditional on.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, int64, error) {
	s := (*Store)(r)
	o, err := s.read(ctx, key, true)
	if err != nil {
		return fence.Record{}, 0, err
	}
	if o.gen != 0 && o.token > token {
		return fence.Record{}, 0, &fence.StaleError{Resource: key, Token: token, Current: o.token}
	}
	gen := o.gen
	if o.gen == 0 || o.token < token {
		g, ok, err := s.writeIf(ctx, opGetForUpdate, key, o.gen, token, o.gen == 0 || o.none, o.value)
		switch {
		case err != nil:
			return fence.Record{}, 0, err
		case !ok:
			return fence.Record{}, 0, fence.ErrChanged
		}
		gen = g
	}
	if o.gen == 0 || o.none {
		return fence.Record{}, gen, nil
	}
	return fence.Record{Token: token, Value: o.value}, gen, nil
}

// WriteIf writes v with token on generation gen.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, gen int64, v []byte) error {
	s := (*Store)(r)
	_, ok, id, err := s.writeIfID(ctx, opUpdate, key, gen, token, false, v)
	if ok || err != nil {
		return err
	}
	// Refused: by another write, or by this one's first copy if it was
	// delivered twice (its id is then in the object).
	if o, err := s.read(ctx, key, false); err == nil && o.id == id {
		return nil
	}
	return fence.ErrChanged
}

// WaitUpdate waits before the next round, as Put's loop does.
func (r *rounds) WaitUpdate(ctx context.Context, key string, round int) error {
	return backoff(ctx, key, round)
}

// UpdateConflict is the error of an Update whose object kept changing.
func (r *rounds) UpdateConflict(key string, token fence.Token, _ error) error {
	return conflictError(key, token)
}
