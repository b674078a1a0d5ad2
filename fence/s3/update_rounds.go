package s3fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// updateRounds is a Store's [fence.UpdateRounds]: its Update is fence's
// loop over them. A round claims the key as GetForUpdate does and writes
// fn's value conditional on the version the claim read or wrote; a round
// refused (412, 409) waits as Put's loop does before the next.
type updateRounds Store

// refusal is a conditional PUT refused because the object changed: the
// loop reads again, and the last one is the cause of [ErrConflict].
type refusal struct{ err error }

func (r refusal) Error() string        { return fmt.Sprint(r.err) }
func (r refusal) Is(target error) bool { return target == fence.ErrChanged }

// StartUpdate starts an Update's span.
func (r *updateRounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	ctx, tw := r.tel.update.Start(ctx, token)
	if tw.Recording() {
		tw.SetResource(key)
	}
	return ctx, tw.UpdateSpan()
}

// ClaimRead is the claim; it returns the version fn's write is
// conditional on.
func (r *updateRounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, version, error) {
	s := (*Store)(r)
	sn, refused, err := s.claim(ctx, key, token)
	switch {
	case refused:
		return fence.Record{}, version{}, refusal{err}
	case err != nil:
		return fence.Record{}, version{}, err
	case sn.v.etag == "":
		// The claim landed, but the server sent no ETag to make the write
		// conditional on: the next round reads it.
		return fence.Record{}, version{}, refusal{s.failure("put", key, errNoETag)}
	}
	return sn.record(token), sn.v, nil
}

// WriteIf writes value under token, conditional on v.
func (r *updateRounds) WriteIf(ctx context.Context, key string, token fence.Token, v version, value []byte) error {
	s := (*Store)(r)
	w, err := s.newWrite(key, header{token: token}, bytes.NewReader(value), nil)
	if err != nil {
		return err
	}
	refused, err := s.send(ctx, w, v, true)
	if refused {
		return refusal{err}
	}
	return err
}

// WaitUpdate waits before the next round, as Put's loop does.
func (r *updateRounds) WaitUpdate(ctx context.Context, key string, round int) error {
	if err := (*Store)(r).backoff(ctx, key, round); err != nil {
		return err
	}
	r.tel.reread(ctx)
	return nil
}

// UpdateConflict is [ErrConflict] with the last refusal.
func (r *updateRounds) UpdateConflict(key string, _ fence.Token, last error) error {
	var rf refusal
	if errors.As(last, &rf) {
		last = rf.err
	}
	return fmt.Errorf("%w: s3://%s/%s, %d conditional PUTs refused: %w", ErrConflict, r.bucket, key, fence.UpdateAttempts, last)
}
