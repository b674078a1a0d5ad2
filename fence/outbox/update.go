package outbox

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// UpdateFunc computes what a key-value store's Outbox.Update (fence/etcd,
// fence/redis, fence/dynamodb) writes from the record it claimed (the
// zero Record when the key holds no value): the record's next value and
// the effects recorded with it, whose Resource and Token must be the
// Update's key and token. An error is returned as it is and nothing is
// written.
type UpdateFunc func(old fence.Record) (next []byte, effects []Effect, err error)

// UpdateAllFunc is [UpdateFunc] for a store's Outbox.UpdateAll: the
// values of the keys it writes, as a [fence.UpdateAllFunc] returns them,
// and the effects, each on one of the claimed keys with that key's token.
type UpdateAllFunc func(old map[string]fence.Record) (next map[string][]byte, effects []Effect, err error)

// Recording is what an [UpdateFunc] returned, as [RunUpdate] hands it to
// the store's conditional write: the record's next value and its effects.
type Recording struct {
	Value   []byte
	Effects []Effect
}

// RunUpdate is [fence.RunUpdateOf] for a store's Outbox.Update: each round
// claims and reads key through r, calls fn, and has r's WriteIf write fn's
// value and effects (a [Recording]) in one conditional request. The
// loop's rules, its checks and r's optional interfaces
// ([fence.UpdateTracer], ...) are RunUpdateOf's; a nil fn is refused with
// an error matching [fence.ErrInvalidArgument].
func RunUpdate[S any](ctx context.Context, r fence.UpdateRoundsOf[S, fence.Record, Recording], key string, token fence.Token, fn UpdateFunc) error {
	var f func(fence.Record) (Recording, error) // nil for a nil fn: RunUpdateOf refuses it
	if fn != nil {
		f = func(old fence.Record) (Recording, error) {
			v, effects, err := fn(old)
			return Recording{Value: v, Effects: effects}, err
		}
	}
	return fence.RunUpdateOf(ctx, r, key, token, f)
}

// UpdateAllRounds is what a store supplies to [RunUpdateAll]: the rounds
// of a [fence.UpdateAllRounds] whose WriteAllIf also records effects, in
// the same atomic request as values, that lands only if nothing changed
// since ClaimReadAll's read. Its rules are fence.UpdateAllRounds'; the
// optional [fence.UpdateAllTracer] and [fence.UpdateAllChecker] on the
// same value are used as RunUpdateAll's.
type UpdateAllRounds[S any] interface {
	ClaimReadAll(ctx context.Context, set []fence.Claim) (old map[string]fence.Record, read S, err error)
	WriteAllIf(ctx context.Context, set []fence.Claim, read S, values map[string][]byte, effects []Effect) error
}

// RunUpdateAll is [fence.RunUpdateAll] for a store's Outbox.UpdateAll:
// each round claims and reads every key of claims through r, calls fn, and
// has r's WriteAllIf write fn's values and effects in one conditional
// request. Its rules and checks are fence.RunUpdateAll's; a nil fn or r is
// refused with an error matching [fence.ErrInvalidArgument].
func RunUpdateAll[S any](ctx context.Context, r UpdateAllRounds[S], claims []fence.Claim, fn UpdateAllFunc) error {
	a := &allRounds[S]{r: r}
	var f fence.UpdateAllFunc // nil for a nil fn: RunUpdateAll refuses it
	if fn != nil {
		f = func(old map[string]fence.Record) (map[string][]byte, error) {
			next, effects, err := fn(old)
			a.effects = effects
			return next, err
		}
	}
	if r == nil {
		if _, err := fence.CheckUpdateAll(ctx, claims, f); err != nil {
			return err
		}
		return fmt.Errorf("%w: outbox.RunUpdateAll: nil rounds", fence.ErrInvalidArgument)
	}
	return fence.RunUpdateAll(ctx, a, claims, f)
}

// allRounds is the [fence.UpdateAllRounds] of one RunUpdateAll: effects
// are those of fn's last call, which fence.RunUpdateAll makes just before
// WriteAllIf, in the same goroutine. It passes r's optional interfaces on.
type allRounds[S any] struct {
	r       UpdateAllRounds[S]
	effects []Effect
}

func (a *allRounds[S]) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, S, error) {
	return a.r.ClaimReadAll(ctx, set)
}

func (a *allRounds[S]) WriteAllIf(ctx context.Context, set []fence.Claim, read S, values map[string][]byte) error {
	return a.r.WriteAllIf(ctx, set, read, values, a.effects)
}

// CheckUpdateAll is r's, when it has one.
func (a *allRounds[S]) CheckUpdateAll(set []fence.Claim) error {
	if c, ok := a.r.(fence.UpdateAllChecker); ok {
		return c.CheckUpdateAll(set)
	}
	return nil
}

// StartUpdateAll is r's, when it has one; otherwise a span that records
// nothing.
func (a *allRounds[S]) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	if t, ok := a.r.(fence.UpdateAllTracer); ok {
		return t.StartUpdateAll(ctx, set)
	}
	return ctx, noSpan{}
}

// noSpan is the span of rounds with no tracer.
type noSpan struct{}

func (noSpan) End(error) {}
