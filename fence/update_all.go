package fence

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// UpdateAllFunc computes what an [AllUpdater]'s UpdateAll writes from the
// records of the keys it claimed: old has an entry for every claimed key,
// the zero Record for one that holds no value. The map it returns has the
// new value of each key it writes; a claimed key it leaves out keeps its
// record (its claim still fences the write: the write lands only if that
// record has not changed either). A key it returns that was not claimed is
// refused with an error matching [ErrInvalidArgument], and nothing is
// written.
//
// As for [UpdateFunc], it may be called more than once (again after a
// conflict), so it should only compute; its error aborts the update,
// writes nothing, and is returned as it is; a panic writes nothing and is
// passed on. old is the function's own to keep or change.
type UpdateAllFunc func(old map[string]Record) (map[string][]byte, error)

// AllUpdater is the read-modify-write of [Updater] over several keys at
// once, each claimed with its own token, written all or nothing: a
// transfer between two accounts, whose two legs written with two Updates
// are half applied when the holder stops between them and a newer holder
// goes on. It is optional, as io.WriterTo is: the stores whose server has
// a transaction over several keys implement it (MemoryStore, fence/etcd
// with one Txn, fence/dynamodb with TransactWriteItems, fence/redis with
// one script over keys of one hash slot); S3 and GCS have none.
//
// UpdateAll, as fence/fencetest checks it:
//
//   - claims every key for its claim's token as [Updater.GetForUpdate]
//     does, and reads its record; a higher floor on any key refuses the
//     call with a [*StaleError] naming that key, before fn runs;
//   - passes the records to fn, and writes fn's values with their keys'
//     tokens in one atomic request that lands only if no key's floor and
//     no key's record has changed since the read: all of them or none;
//   - on such a change by a writer with the same token reads again, up to
//     [UpdateAttempts] times, then returns an error matching
//     [ErrConflict]; a newer holder's floor on any key at the write gives
//     a [*StaleError] naming that key, and nothing of fn's lands;
//   - reports a request whose reply was lost as [ErrUnknownOutcome] (each
//     request sent once whatever the client's retries; a copy delivered
//     late or twice never applies twice or over a newer token);
//   - refuses before any I/O what [CheckUpdateAll] refuses.
type AllUpdater interface {
	UpdateAll(ctx context.Context, claims []Claim, fn UpdateAllFunc) error
}

// UpdateHeld runs s.UpdateAll over h.Claims(): one claim per resource h
// holds, such as an *etcdlock.MultiLock's locks, each with its own token,
// as fence/postgres's RunInTxHeld does for a transaction. A nil s or h (a
// typed nil too) is refused with an error matching [ErrInvalidArgument]
// before any I/O; so is an h that holds nothing. An h that already knows
// its locks are lost, or whose validity has ended, is refused with
// [ErrLockLost], nothing sent (see [HeldClaims]).
func UpdateHeld(ctx context.Context, s AllUpdater, h Claimer, fn UpdateAllFunc) error {
	if nilcheck.IsNil(s) {
		return fmt.Errorf("%w: UpdateHeld: nil store", ErrInvalidArgument)
	}
	claims, err := HeldClaims(h)
	if err != nil {
		return err
	}
	return s.UpdateAll(ctx, claims, fn)
}

// HeldClaims returns h.Claims(), the first step of every adapter's
// UpdateHeld. It refuses a nil h (a typed nil too) with an error matching
// [ErrInvalidArgument], and, with [ErrLockLost], an h that knows its locks
// are gone: one with a Done() <-chan struct{} that is closed (an
// *etcdlock.MultiLock one of whose locks was lost, or that was unlocked),
// or an [Expirer] whose ValidUntil has passed. As [Guard.Check], that is
// only an optimisation that saves the round trips: the resources' floors
// refuse a holder that stopped after it.
func HeldClaims(h Claimer) ([]Claim, error) {
	if nilcheck.IsNil(h) {
		return nil, fmt.Errorf("%w: nil holder", ErrInvalidArgument)
	}
	if d, ok := h.(interface{ Done() <-chan struct{} }); ok {
		select {
		case <-d.Done():
			return nil, fmt.Errorf("%w (holder of %s reports its locks lost or released)", ErrLockLost, ClaimsLabel(h.Claims()))
		default:
		}
	}
	if e, ok := h.(Expirer); ok {
		if until := e.ValidUntil(); !time.Now().Before(until) {
			return nil, fmt.Errorf("%w (holder of %s: validity deadline passed %v ago)", ErrLockLost, ClaimsLabel(h.Claims()), time.Since(until).Round(time.Millisecond))
		}
	}
	return h.Claims(), nil
}

// CheckUpdateAll validates an UpdateAll's arguments, as every adapter does
// before any I/O, and returns the claims as [SortClaims] does (the order
// in which they are taken): it refuses an empty list, a key claimed with
// two tokens, an empty key, a token that is not positive, a nil fn, and a
// nil or ended ctx.
func CheckUpdateAll(ctx context.Context, claims []Claim, fn UpdateAllFunc) ([]Claim, error) {
	set, err := SortClaims(claims)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: UpdateAll: nil function", ErrInvalidArgument)
	}
	return set, ctxErr(ctx)
}

// CallUpdateAll calls fn with old and checks what it returns: a key that
// set does not claim is refused with an error matching
// [ErrInvalidArgument]. Adapters call fn through it, so every store refuses
// alike.
func CallUpdateAll(fn UpdateAllFunc, set []Claim, old map[string]Record) (map[string][]byte, error) {
	next, err := fn(old)
	if err != nil {
		return nil, err
	}
	for k := range next {
		if !claimed(set, k) {
			return nil, fmt.Errorf("%w: UpdateAll: the function returned a value for %q, which is not claimed; nothing written", ErrInvalidArgument, k)
		}
	}
	return next, nil
}

// claimed reports whether set claims k.
func claimed(set []Claim, k string) bool {
	for _, c := range set {
		if c.Resource == k {
			return true
		}
	}
	return false
}

// ClaimsLabel names the resources of claims, as an UpdateAll's
// [UnknownOutcomeError] does in Resource ("a, b").
func ClaimsLabel(claims []Claim) string {
	names := make([]string, len(claims))
	for i, c := range claims {
		names[i] = c.Resource
	}
	return strings.Join(names, ", ")
}
