package fence

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// UpdateFunc computes the value an [Updater]'s Update writes from the
// record the resource holds: old.Token is 0 and old.Value nil when the key
// holds no value. It may be called more than once (again after a
// conflict), so it should only compute; old.Value's bytes are its own to
// change (and to return). An error it returns aborts the update, writes
// nothing, and is returned by Update as it is; a panic writes nothing and
// is passed on.
type UpdateFunc func(old Record) ([]byte, error)

// UpdateAttempts is how many times an Update reads and writes before it
// gives up on a record that keeps changing under it (writers with the
// same token, the holder's own concurrent writes) and returns an error
// matching [ErrConflict].
const UpdateAttempts = 10

// Updater is the read side of the fencing contract: the reads a critical
// section makes before it writes. Fencing writes alone is not enough: a
// newer holder that reads a value, while an older holder's late write is
// still to land, and writes back what it computed from that read, loses the
// older holder's acknowledged write with no error on either side. So the
// first touch, read or write, claims the resource.
//
// Every adapter's Store implements it, and the conformance suite in
// fence/fencetest checks:
//
//   - GetForUpdate raises the key's floor to token (the highest token the
//     resource has accepted) atomically with the read, and returns the
//     record as it was, its Token now the claim's. From then on a write
//     with a lower token is refused with [ErrStale]. When a higher token
//     is there already, it refuses with [ErrStale] and changes nothing.
//     A key with no value is claimed too, and the result matches
//     [ErrNotFound].
//   - Update reads the key as GetForUpdate does, passes the record to fn,
//     and writes fn's result with token, only if the record has not changed
//     since the read (atomic against a late older write and against a
//     writer with the same token). On such a change it reads again, up to
//     [UpdateAttempts] times, then returns an error matching
//     [ErrConflict]. A newer holder refuses it with [ErrStale].
//   - Both reject an empty key, a token that is not positive and a nil fn
//     before any I/O, and report a request whose reply was lost as
//     [ErrUnknownOutcome], as Put does.
//
// [Store.Get] is a plain read: it claims nothing, so use it for what no
// write of yours will follow. An adapter's Update is [RunUpdate] over its
// claim-and-read and its conditional write.
type Updater interface {
	GetForUpdate(ctx context.Context, key string, token Token) (Record, error)
	Update(ctx context.Context, key string, token Token, fn UpdateFunc) error
}

// Claim is one resource and the token a holder claims it with, as a
// transaction over several resources takes them (fence/postgres's and
// fence/sql's RunInTxAll).
type Claim struct {
	Resource string
	Token    Token
}

// Claimer is a holder of several tokens at once, each for its own
// resource, such as an *etcdlock.MultiLock (one per lock name).
type Claimer interface {
	Claims() []Claim
}

// SortClaims returns claims sorted by resource, a resource claimed twice
// with the same token once: the one order in which a transaction over
// several resources takes them, so that two such transactions never
// deadlock on each other. It refuses an empty list and a resource claimed
// with two tokens (errors matching [ErrInvalidArgument]), and a claim with
// an empty resource ([ErrInvalidKey]) or a token that is not positive
// ([ErrInvalidToken]).
func SortClaims(claims []Claim) ([]Claim, error) {
	if len(claims) == 0 {
		return nil, fmt.Errorf("%w: no claims: a fenced transaction needs at least one resource", ErrInvalidArgument)
	}
	for i, c := range claims {
		if c.Resource == "" {
			return nil, fmt.Errorf("%w: claim %d: empty resource", ErrInvalidKey, i)
		}
		if err := c.Token.Validate(); err != nil {
			return nil, fmt.Errorf("fence: claim %d (%q): %w", i, c.Resource, err)
		}
	}
	set := slices.Clone(claims)
	slices.SortFunc(set, func(a, b Claim) int {
		return cmp.Or(strings.Compare(a.Resource, b.Resource), cmp.Compare(a.Token, b.Token))
	})
	out := set[:1]
	for _, c := range set[1:] {
		last := out[len(out)-1]
		switch {
		case c.Resource != last.Resource:
			out = append(out, c)
		case c.Token != last.Token:
			return nil, fmt.Errorf("%w: resource %q claimed twice, with tokens %d and %d", ErrInvalidArgument, c.Resource, last.Token, c.Token)
		}
	}
	return out, nil
}

// CheckUpdate validates an Update's arguments, as every adapter does
// before any I/O.
func CheckUpdate(ctx context.Context, key string, token Token, fn UpdateFunc) error {
	if err := CheckRead(ctx, key, token); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Update: nil function", ErrInvalidArgument)
	}
	return nil
}

// CheckRead validates a GetForUpdate's arguments, as every adapter does
// before any I/O.
func CheckRead(ctx context.Context, key string, token Token) error {
	if err := checkPut(key, token); err != nil {
		return err
	}
	return ctxErr(ctx)
}

// GetForUpdate reads key from s with the guard's token, claiming it (see
// [Updater]), after the checks [Guard.Do] makes.
func (g *Guard) GetForUpdate(ctx context.Context, s Updater, key string) (Record, error) {
	if nilcheck.IsNil(s) {
		return Record{}, fmt.Errorf("%w: Guard.GetForUpdate: nil store", ErrInvalidArgument)
	}
	var rec Record
	err := g.Do(ctx, func(ctx context.Context, t Token) error {
		var err error
		rec, err = s.GetForUpdate(ctx, key, t)
		return err
	})
	return rec, err
}

// Update runs a read-modify-write of key in s with the guard's token (see
// [Updater]), after the checks [Guard.Do] makes.
func (g *Guard) Update(ctx context.Context, s Updater, key string, fn UpdateFunc) error {
	if nilcheck.IsNil(s) {
		return fmt.Errorf("%w: Guard.Update: nil store", ErrInvalidArgument)
	}
	return g.Do(ctx, func(ctx context.Context, t Token) error {
		return s.Update(ctx, key, t, fn)
	})
}
