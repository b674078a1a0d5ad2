package redisfence

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// pageSize is how many effect keys Pending and Parked read at once.
const pageSize = 256

// Pending returns up to limit recorded effects in scope that are neither
// settled nor parked and whose resource is not in skip, in recording
// order ([outbox.Log]): the pending set by position, read in pages of
// its keys, each with the effects it names. It refuses a limit below 1
// and an invalid scope with an error matching [fence.ErrInvalidArgument],
// returns [ErrCorrupt] for an effect not in this package's format, and an
// error matching [outbox.ErrNotPermitted] when Redis's ACL refuses the
// user (NOPERM). ctx bounds the reads.
func (o *Outbox) Pending(ctx context.Context, scope outbox.Scope, skip []string, limit int) ([]outbox.Effect, error) {
	if err := o.checkList(ctx, scope, limit); err != nil {
		return nil, err
	}
	var out []outbox.Effect
	err := o.scan(ctx, keyPending, func(e outbox.Effect, _ string) bool {
		if scope.Has(e.Resource) && !slices.Contains(skip, e.Resource) {
			out = append(out, e)
		}
		return len(out) < limit
	})
	return out, err
}

// Parked returns up to limit parked effects in scope, in recording order,
// with the reason and attempts they were settled with
// ([outbox.Requeuer]). Its arguments and errors are [Outbox.Pending]'s.
func (o *Outbox) Parked(ctx context.Context, scope outbox.Scope, limit int) ([]outbox.Parked, error) {
	if err := o.checkList(ctx, scope, limit); err != nil {
		return nil, err
	}
	var out []outbox.Parked
	var bad error
	err := o.scan(ctx, keyParked, func(e outbox.Effect, marker string) bool {
		if !scope.Has(e.Resource) {
			return true
		}
		reason, n, err := outboxcodec.DecodeMarker([]byte(marker))
		if err != nil {
			bad = fmt.Errorf("%w: parked marker of %s: %w", ErrCorrupt, e.Key(), err)
			return false
		}
		out = append(out, outbox.Parked{Effect: e, Reason: reason, Attempts: n})
		return len(out) < limit
	})
	if bad != nil {
		return nil, bad
	}
	return out, err
}

// checkList validates the arguments of Pending and Parked.
func (o *Outbox) checkList(ctx context.Context, scope outbox.Scope, limit int) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	return outboxcodec.CheckList(scope, limit, ErrInvalidArgument)
}

// scan calls each with the effects of the sorted set set, in order, and
// (for the parked set) their markers, until each returns false or the set
// ends. Keys settled between two reads are passed over.
func (o *Outbox) scan(ctx context.Context, set string, each func(e outbox.Effect, marker string) bool) error {
	from := "-inf"
	for {
		page := redis.NewZSliceCmd(ctx, "zrangebyscore", o.key(set), from, "+inf", "withscores", "limit", 0, pageSize)
		if err := o.store.c.Process(ctx, page); err != nil {
			return notPermitted(fmt.Errorf("redisfence: reading the outbox under %q: %w", o.prefix, err))
		}
		zs := page.Val()
		if len(zs) == 0 {
			return nil
		}
		effects, markers, err := o.read(ctx, zs, set == keyParked)
		if err != nil {
			return err
		}
		for i, v := range effects {
			s, ok := v.(string)
			if !ok {
				continue // settled since the page was read
			}
			e, _, err := outboxcodec.Decode([]byte(s))
			if err != nil {
				return fmt.Errorf("%w: effect %v under %q: %w", ErrCorrupt, zs[i].Member, o.prefix, err)
			}
			m, _ := markers[i].(string)
			if !each(e, m) {
				return nil
			}
		}
		if len(zs) < pageSize {
			return nil
		}
		from = "(" + strconv.FormatFloat(zs[len(zs)-1].Score, 'f', -1, 64)
	}
}

// read returns the effects zs names and, when markers, their markers.
func (o *Outbox) read(ctx context.Context, zs []redis.Z, markers bool) ([]any, []any, error) {
	get := func(hash string) ([]any, error) {
		args := []any{"hmget", o.key(hash)}
		for _, z := range zs {
			args = append(args, z.Member)
		}
		cmd := redis.NewSliceCmd(ctx, args...)
		if err := o.store.c.Process(ctx, cmd); err != nil {
			return nil, notPermitted(fmt.Errorf("redisfence: reading the outbox under %q: %w", o.prefix, err))
		}
		return cmd.Val(), nil
	}
	effects, err := get(keyEffects)
	if err != nil || !markers {
		return effects, make([]any, len(zs)), err
	}
	ms, err := get(keyReasons)
	return effects, ms, err
}

// Settle records that each of done was delivered (its effect deleted,
// its key kept in the delivered set, if it is still recorded) or parked
// (moved to the parked set at its position, with its reason), in one
// script fenced on by: the outbox's floors hash holds, for by.Resource,
// the highest token that has settled through it. A lower token marks
// nothing and gets a *[fence.StaleError]; otherwise the script raises
// the floor and marks them all. With no effects it only raises the
// floor: a dispatcher's takeover. The floor is the dispatcher's own,
// unrelated to the tokens of the effects' writers. An effect already
// settled or no longer recorded is passed over. The script is sent once;
// a lost reply gives an error matching [fence.ErrUnknownOutcome] (the one
// rule of [Store.Put]); an ACL's refusal, of the script or of a command
// in it, matches [outbox.ErrNotPermitted]. It refuses an invalid by
// before any I/O. ctx bounds the request.
func (o *Outbox) Settle(ctx context.Context, by fence.Claim, done []outbox.Settled) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := fence.CheckRead(ctx, by.Resource, by.Token); err != nil {
		return err
	}
	args := make([]any, 0, 2+3*len(done))
	args = append(args, by.Resource, padToken(by.Token))
	for _, d := range done {
		if d.Parked == "" {
			args = append(args, d.Effect.Key(), "0", "")
		} else {
			args = append(args, d.Effect.Key(), "1", outboxcodec.EncodeMarker(d.Parked, d.Attempts))
		}
	}
	keys := []string{o.key(keyFloors), o.key(keyPending), o.key(keyParked), o.key(keyReasons), o.key(keyEffects), o.key(keyDelivered)}
	reply, err := settleScript.runKeys(ctx, o.store.c, keys, args...)
	return notPermitted(result("settle", by.Resource, by.Token, reply, err))
}

// Requeue makes the parked effect e pending again, at its place in its
// resource's order, in one script that also wakes the watchers. An
// effect that is not parked gets an error matching [fence.ErrNotFound]
// and nothing changes. It refuses an empty Resource, an invalid Token
// and a negative Seq before any I/O (only they name the effect); a lost
// reply gives an error matching [fence.ErrUnknownOutcome]. ctx bounds
// the request.
func (o *Outbox) Requeue(ctx context.Context, e outbox.Effect) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := outboxcodec.CheckRequeue(ctx, e, ErrInvalidArgument); err != nil {
		return err
	}
	keys := []string{o.key(keyPending), o.key(keyParked), o.key(keyReasons)}
	reply, err := requeueScript.runKeys(ctx, o.store.c, keys, e.Key(), o.key(chanWake), e.Resource)
	if err != nil {
		return notPermitted(writeError("requeue", e.Resource, e.Token, err))
	}
	if status(reply) != replyOK {
		return fmt.Errorf("%w: redisfence: effect %s on %q is not parked", fence.ErrNotFound, e.Key(), e.Resource)
	}
	return nil
}
