package azblobfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate returns the record under key, claiming key for token (see
// [fence.Updater]): it reads the blob whole and, by the token there:
//
//   - higher: it refuses with a *[fence.StaleError] (Current set), and
//     writes nothing.
//   - the same: the key is claimed already; it returns the record.
//   - lower: it writes the same value back with token, with If-Match on
//     the ETag read, and returns the record with token. The rewrite costs
//     a Put Blob of the whole value, once per holder and key: its next
//     calls find the key claimed.
//   - no blob, or a floor: it writes a floor with token (If-None-Match:
//     *, or If-Match), and returns an error matching [fence.ErrNotFound].
//
// When another writer changes the blob between the read and the rewrite,
// it reads and decides again, up to [fence.UpdateAttempts] times, then
// fails with an error matching [fence.ErrConflict]. A rewrite whose reply
// was lost is decided as a Put's is. Other errors, the checks before any
// I/O and the role of ctx are those of Put.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	ctx, tw := s.tel.Op(opGetForUpdate).Start(ctx, token)
	if tw.Recording() {
		tw.SetResource(key)
	}
	rec, _, err := s.claimRounds(ctx, key, token)
	if errors.Is(err, fence.ErrNotFound) {
		tw.End(nil) // claimed: a write that landed
	} else {
		tw.End(err)
	}
	return rec, err
}

// claimRounds claims key until a round is not refused, at most
// fence.UpdateAttempts times, waiting between rounds as Put does.
func (s *Store) claimRounds(ctx context.Context, key string, token fence.Token) (fence.Record, version, error) {
	if err := s.ensureChecked(ctx); err != nil {
		return fence.Record{}, version{}, err
	}
	for n := 1; ; n++ {
		rec, v, err := s.claim(ctx, key, token)
		switch {
		case !errors.Is(err, fence.ErrChanged):
			return rec, v, err
		case n == fence.UpdateAttempts:
			return fence.Record{}, version{}, conflictError(key, token)
		}
		if err := backoff(ctx, key, n); err != nil {
			return fence.Record{}, version{}, err
		}
	}
}

// claim is one round of a claim: it reads the blob whole and, unless it
// holds token already, writes it back with token on the ETag read. It
// returns the record as claimed (an error matching fence.ErrNotFound for
// none) and the blob's version after the claim; an error matching
// fence.ErrChanged when the blob changed after the read.
func (s *Store) claim(ctx context.Context, key string, token fence.Token) (fence.Record, version, error) {
	v, value, err := s.download(ctx, key)
	switch {
	case err != nil:
		return fence.Record{}, version{}, err
	case v.exists() && v.token > token:
		return fence.Record{}, version{}, &fence.StaleError{Resource: key, Token: token, Current: v.token}
	case !v.exists() || v.token < token:
		w := version{token: token, id: newWriteID(), floor: !v.hasValue()}
		refused, err := s.attempt(ctx, key, &w, value, v)
		switch {
		case refused:
			return fence.Record{}, version{}, changed{err}
		case err != nil:
			return fence.Record{}, version{}, err
		case w.etag == "":
			// It landed, but the server sent no ETag to make the next
			// write conditional on: the next round reads it.
			return fence.Record{}, version{}, changed{errNoETag}
		}
		v = w
	}
	if v.floor {
		return fence.Record{}, v, fmt.Errorf("%w: %q (claimed with token %d)", fence.ErrNotFound, key, token)
	}
	return fence.Record{Token: token, Value: value}, v, nil
}

// errNoETag is a write's result when the server sent no ETag.
var errNoETag = errors.New("azblobfence: the server sent no ETag with the write")

// changed is a conditional write refused because the blob changed: the
// loop reads again.
type changed struct{ err error }

func (c changed) Error() string        { return fmt.Sprint(c.err) }
func (c changed) Unwrap() error        { return c.err }
func (c changed) Is(target error) bool { return target == fence.ErrChanged }

// Update is a read-modify-write of key with token (see [fence.Updater]):
// each round claims the key as [Store.GetForUpdate] does (a higher token
// refuses it with a *[fence.StaleError] before fn runs), calls fn with
// the record (the zero Record when there is none), and writes fn's result
// with token with If-Match on the ETag of the blob the claim read or
// wrote, so that it lands only if nothing was written in between (a late
// older write, or a writer with the same token); on a change the next
// round reads and calls fn again, up to [fence.UpdateAttempts] rounds,
// then Update fails with an error matching [fence.ErrConflict]. fn's
// error is returned as it is, and fn's value is not written, though the
// claim stays (so too for a value longer than [MaxValueSize]: [ErrTooLarge]); a panic is passed on. A final write delivered twice (its
// copy refused by the write's own ETag) is told apart by its id in the
// metadata: Update does not call fn again for it (nor when the read back
// fails: the error then matches [fence.ErrUnknownOutcome]). Other errors are those
// of Put; a nil fn is refused with [ErrInvalidArgument] before any I/O.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Update: nil function", ErrInvalidArgument)
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}
