package fence

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// UpdateRounds is what an adapter supplies to [RunUpdate], the one loop
// behind every [Updater.Update] of this module: the two halves of a
// round, the loop running fn between them.
//
//   - ClaimRead claims key for token and reads its record, as
//     [Updater.GetForUpdate] does: a higher floor refuses it with an error
//     matching [ErrStale], and a key with no value gives an error matching
//     [ErrNotFound] (claimed all the same; fn then gets the zero Record).
//     read is whatever WriteIf needs to tell that the record has not
//     changed since (a revision, a version, an ETag, the value itself: a
//     copy, since fn may change the record's bytes in place).
//   - WriteIf writes value under key with token only if the record is
//     still the one read: one conditional request, atomic against a late
//     write of an older holder and against a writer with the same token.
//     A higher floor refuses it with an error matching [ErrStale].
//
// Either returns an error matching [ErrChanged] when the record changed
// under it (WriteIf's condition failed, or the claim met another writer):
// the loop then starts a new round. Any other error ends the update and
// is returned as it is; a request whose reply was lost is reported as
// [ErrUnknownOutcome], as Put's.
//
// Methods of the optional interfaces [UpdateTracer], [UpdateWaiter] and
// [UpdateConflicter] on the same value add a span, a wait between rounds
// and an adapter's own conflict error. The value must be safe for
// concurrent use if the Store is.
type UpdateRounds[S any] = UpdateRoundsOf[S, Record, []byte]

// UpdateRoundsOf is [UpdateRounds] for a store whose records are not a
// [Record] and a []byte, such as fence/redis's Hash (fields of a hash,
// read and written as maps): ClaimRead returns the record as fn gets it
// (a copy: fn may change it), WriteIf gets what fn returned. The rules
// are UpdateRounds'; [RunUpdateOf] is the loop over them.
type UpdateRoundsOf[S, V, W any] interface {
	ClaimRead(ctx context.Context, key string, token Token) (rec V, read S, err error)
	WriteIf(ctx context.Context, key string, token Token, read S, value W) error
}

// UpdateSpan is the telemetry of one update, from its start to End, which
// the loop calls once with the update's result ([ErrPanicked] when fn
// panicked).
type UpdateSpan interface {
	End(err error)
}

// UpdateTracer is an optional interface of an [UpdateRounds]: RunUpdate
// calls StartUpdate after the checks of its arguments, before any I/O,
// and runs the rounds in the context it returns.
type UpdateTracer interface {
	StartUpdate(ctx context.Context, key string, token Token) (context.Context, UpdateSpan)
}

// UpdateWaiter is an optional interface of an [UpdateRounds]: RunUpdate
// calls WaitUpdate after round (counted from 1) when the record changed
// and another round follows, as a backoff for a store whose writers
// collide on a shared server. Its error (ctx ended) ends the update as it
// is. Without it, the next round starts at once.
type UpdateWaiter interface {
	WaitUpdate(ctx context.Context, key string, round int) error
}

// UpdateConflicter is an optional interface of an [UpdateRounds]:
// RunUpdate returns UpdateConflict's error when the record changed in
// every one of [UpdateAttempts] rounds, last being the [ErrChanged] of
// the last round. The error must match [ErrConflict]. Without it, the
// error is fence's own.
type UpdateConflicter interface {
	UpdateConflict(key string, token Token, last error) error
}

// RunUpdate is the read-modify-write loop of [Updater.Update], written
// once for every adapter: each round claims and reads key through r,
// calls fn with the record, and has r write fn's result with token on the
// condition that the record has not changed. On a change it runs another
// round, up to [UpdateAttempts] in all, then returns an error matching
// [ErrConflict].
//
// It refuses an empty key, a token that is not positive, a nil fn and a
// nil or ended ctx before any I/O ([CheckUpdate]). fn's error is returned
// as it is and a panic in fn is passed on; nothing of fn's is written
// either way, though the claim stays. When ctx ends while fn runs, ctx's
// error is returned and nothing is sent. Every other error is r's, as it
// is. ctx bounds the whole call, and is the one r's requests get (the
// span's, when r is an [UpdateTracer]).
func RunUpdate[S any](ctx context.Context, r UpdateRounds[S], key string, token Token, fn UpdateFunc) error {
	return RunUpdateOf[S, Record, []byte](ctx, r, key, token, fn)
}

// RunUpdateOf is [RunUpdate] over an [UpdateRoundsOf], for records of
// other types: fn gets what r's ClaimRead read (the zero V when it found
// no value), and r's WriteIf what fn returns.
func RunUpdateOf[S, V, W any](ctx context.Context, r UpdateRoundsOf[S, V, W], key string, token Token, fn func(old V) (W, error)) (err error) {
	if err := CheckRead(ctx, key, token); err != nil {
		return err
	}
	switch {
	case fn == nil:
		return fmt.Errorf("%w: Update: nil function", ErrInvalidArgument)
	case nilcheck.IsNil(r): // a typed nil too: a nil *Store's rounds
		return fmt.Errorf("%w: RunUpdate: nil rounds", ErrInvalidArgument)
	}
	u := oneKey[S, V, W]{r: r, key: key, token: token, fn: fn}
	t, ok := r.(UpdateTracer)
	if !ok {
		return runRounds(ctx, u)
	}
	ctx, span := t.StartUpdate(ctx, key, token)
	err = ErrPanicked // unless the return below sets it
	defer func() { span.End(err) }()
	return runRounds(ctx, u)
}

// round is one round of an update, of one key or of several.
type round interface {
	attempt(ctx context.Context) (changed bool, err error)
	wait(ctx context.Context, n int) error
	conflict(last error) error
}

// runRounds is the loop of every update: r's rounds until one does not
// meet a change, at most UpdateAttempts.
func runRounds[R round](ctx context.Context, r R) error {
	for n := 1; ; n++ {
		changed, err := r.attempt(ctx)
		switch {
		case !changed:
			return err
		case n == UpdateAttempts:
			return r.conflict(err)
		}
		if err := r.wait(ctx, n); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err // ended during the last round: no new one is sent
		}
	}
}

// oneKey is a round of [RunUpdateOf].
type oneKey[S, V, W any] struct {
	r     UpdateRoundsOf[S, V, W]
	key   string
	token Token
	fn    func(V) (W, error)
}

func (u oneKey[S, V, W]) attempt(ctx context.Context) (bool, error) {
	rec, read, err := u.r.ClaimRead(ctx, u.key, u.token)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			return errors.Is(err, ErrChanged), err
		}
		var zero V
		rec = zero
	}
	v, err := u.fn(rec)
	if err != nil {
		return false, err // fn's, as it is, whatever it matches
	}
	if err := ctx.Err(); err != nil {
		return false, err // ended while fn ran: nothing sent, nothing written
	}
	err = u.r.WriteIf(ctx, u.key, u.token, read, v)
	return err != nil && errors.Is(err, ErrChanged), err
}

func (u oneKey[S, V, W]) wait(ctx context.Context, n int) error {
	if w, ok := u.r.(UpdateWaiter); ok {
		return w.WaitUpdate(ctx, u.key, n)
	}
	return nil
}

func (u oneKey[S, V, W]) conflict(last error) error {
	if c, ok := u.r.(UpdateConflicter); ok {
		return c.UpdateConflict(u.key, u.token, last)
	}
	return fmt.Errorf("%w: %q with token %d, after %d attempts", ErrConflict, u.key, u.token, UpdateAttempts)
}
