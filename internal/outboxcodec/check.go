package outboxcodec

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// CheckList checks the arguments of a store's Pending and Parked, after
// its own check of itself and ctx: a limit below 1 is refused with an
// error matching invalid (the store's ErrInvalidArgument), an invalid
// scope with [outbox.Scope.Validate]'s.
func CheckList(scope outbox.Scope, limit int, invalid error) error {
	if limit < 1 {
		return fmt.Errorf("%w: limit %d (want at least 1)", invalid, limit)
	}
	return scope.Validate()
}

// CheckRequeue checks, before any I/O, what names the effect e of a
// store's Requeue: a negative Seq is refused with an error matching
// invalid (the store's ErrInvalidArgument), an empty Resource, an invalid
// Token and an ended ctx as [fence.CheckRead] refuses them.
func CheckRequeue(ctx context.Context, e outbox.Effect, invalid error) error {
	if e.Seq < 0 {
		return fmt.Errorf("%w: Requeue: negative Seq %d", invalid, e.Seq)
	}
	return fence.CheckRead(ctx, e.Resource, e.Token)
}

// Unique returns done with each effect once, at its first place: a Settle
// given one effect twice marks it once, as the first says.
func Unique(done []outbox.Settled) []outbox.Settled {
	out := make([]outbox.Settled, 0, len(done))
	seen := make(map[string]bool, len(done))
	for _, d := range done {
		if k := d.Effect.Key(); !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}
