package fence

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// UpdateAllRounds is what an adapter supplies to [RunUpdateAll], the loop
// behind every [AllUpdater.UpdateAll], as [UpdateRounds] is for Update.
// set is the claims sorted and checked ([CheckUpdateAll]).
//
//   - ClaimReadAll claims every key of set with its token and reads their
//     records: old has an entry for each key, the zero Record for one
//     with no value. A higher floor on any key refuses the call with a
//     [*StaleError] naming that key.
//   - WriteAllIf writes values (a value for some or all keys of set) with
//     their keys' tokens in one atomic request that lands only if no key's
//     floor and no key's record changed since the read: all or none.
//
// Either returns an error matching [ErrChanged] when a record changed
// under it; the loop then starts a new round. Any other error ends the
// call and is returned as it is. Methods of the optional interfaces
// [UpdateAllTracer] and [UpdateAllChecker] on the same value add a span
// and an adapter's own checks.
type UpdateAllRounds[S any] interface {
	ClaimReadAll(ctx context.Context, set []Claim) (old map[string]Record, read S, err error)
	WriteAllIf(ctx context.Context, set []Claim, read S, values map[string][]byte) error
}

// UpdateAllTracer is an optional interface of an [UpdateAllRounds]:
// RunUpdateAll calls StartUpdateAll after the checks, before any I/O, and
// runs the rounds in the context it returns.
type UpdateAllTracer interface {
	StartUpdateAll(ctx context.Context, set []Claim) (context.Context, UpdateSpan)
}

// UpdateAllChecker is an optional interface of an [UpdateAllRounds]:
// RunUpdateAll calls CheckUpdateAll with the claims sorted, after
// [CheckUpdateAll] and before any I/O, for the adapter's own limits (how
// many keys one request takes). Its error is returned as it is.
type UpdateAllChecker interface {
	CheckUpdateAll(set []Claim) error
}

// RunUpdateAll is the read-modify-write loop of [AllUpdater.UpdateAll],
// written once for every adapter: each round claims and reads every key
// of claims through r, calls fn with the records ([CallUpdateAll]), and
// has r write fn's values on the condition that nothing changed. On a
// change it runs another round, up to [UpdateAttempts] in all, then
// returns an error matching [ErrConflict].
//
// It refuses before any I/O what [CheckUpdateAll] refuses, then what r's
// CheckUpdateAll does ([UpdateAllChecker]). fn's error is returned as it
// is and a panic in fn is passed on; nothing of fn's is written either
// way, though the claims stay. When ctx ends while fn runs, ctx's error is
// returned and nothing is sent. ctx bounds the whole call.
func RunUpdateAll[S any](ctx context.Context, r UpdateAllRounds[S], claims []Claim, fn UpdateAllFunc) (err error) {
	set, err := CheckUpdateAll(ctx, claims, fn)
	if err != nil {
		return err
	}
	if nilcheck.IsNil(r) { // a typed nil too: a nil *Store's rounds
		return fmt.Errorf("%w: RunUpdateAll: nil rounds", ErrInvalidArgument)
	}
	if c, ok := r.(UpdateAllChecker); ok {
		if err := c.CheckUpdateAll(set); err != nil {
			return err
		}
	}
	u := allKeys[S]{r: r, set: set, fn: fn}
	t, ok := r.(UpdateAllTracer)
	if !ok {
		return runRounds(ctx, u)
	}
	ctx, span := t.StartUpdateAll(ctx, set)
	err = ErrPanicked // unless the return below sets it
	defer func() { span.End(err) }()
	return runRounds(ctx, u)
}

// allKeys is a round of [RunUpdateAll].
type allKeys[S any] struct {
	r   UpdateAllRounds[S]
	set []Claim
	fn  UpdateAllFunc
}

func (u allKeys[S]) attempt(ctx context.Context) (bool, error) {
	old, read, err := u.r.ClaimReadAll(ctx, u.set)
	if err != nil {
		return errors.Is(err, ErrChanged), err
	}
	next, err := CallUpdateAll(u.fn, u.set, old)
	if err != nil {
		return false, err // fn's, as it is, or its value for a key not claimed
	}
	if err := ctx.Err(); err != nil {
		return false, err // ended while fn ran: nothing sent, nothing written
	}
	err = u.r.WriteAllIf(ctx, u.set, read, next)
	return err != nil && errors.Is(err, ErrChanged), err
}

func (u allKeys[S]) wait(context.Context, int) error { return nil }

func (u allKeys[S]) conflict(error) error {
	return fmt.Errorf("%w: %q, after %d attempts", ErrConflict, ClaimsLabel(u.set), UpdateAttempts)
}
