package postgres

import (
	"cmp"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// Pending returns up to limit effects in scope that are neither delivered
// nor parked, whose resource is not in skip, in the order they were
// recorded (the id column); see [outbox.Log]. It reads committed rows and
// locks nothing. A limit below 1 or an invalid scope is refused before any
// I/O with an error matching [ErrInvalidArgument]. ctx bounds the call.
func (o *Outbox) Pending(ctx context.Context, scope outbox.Scope, skip []string, limit int) ([]outbox.Effect, error) {
	p, i, err := o.checkRead(ctx, scope, limit)
	if err != nil {
		return nil, err
	}
	if skip == nil {
		skip = []string{} // NULL would make "<> ALL" match nothing
	}
	rows, _ := o.db.Query(ctx, o.sql.pending, p, i, skip, limit)
	effects, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Effect, error) {
		var e outbox.Effect
		err := r.Scan(&e.Resource, &e.Token, &e.Seq, &e.Destination, &e.Payload)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read pending effects of %s: %w", o.label, classify(err))
	}
	return effects, nil
}

// checkRead checks a read's arguments and returns the scope's partitions
// and index.
func (o *Outbox) checkRead(ctx context.Context, scope outbox.Scope, limit int) (int64, int64, error) {
	if err := cmp.Or(o.check(), checkCtx(ctx), scope.Validate()); err != nil {
		return 0, 0, err
	}
	if limit < 1 {
		return 0, 0, fmt.Errorf("%w: limit %d, want >= 1", ErrInvalidArgument, limit)
	}
	if scope.Partitions == 0 {
		scope = outbox.All
	}
	return int64(scope.Partitions), int64(scope.Index), nil
}

// Settle records that each of done was delivered (Parked empty) or parked,
// with the dispatcher's token in delivered_by, in one transaction fenced
// on by.Resource with by.Token by the outbox's [Fences] ([Fences.RunInTx]):
// a token below the resource's fence is refused with a [*fence.StaleError]
// and nothing is marked. No effects only raises the fence: how a
// dispatcher takes over. An effect already settled, or not recorded, is
// passed over. A COMMIT whose answer was lost gives an error matching
// [fence.ErrUnknownOutcome]. Invalid arguments are refused before any
// I/O. ctx bounds the call.
func (o *Outbox) Settle(ctx context.Context, by fence.Claim, done []outbox.Settled) error {
	if err := cmp.Or(o.check(), checkCtx(ctx)); err != nil {
		return err
	}
	n := len(done)
	res, toks, seqs := make([]string, n), make([]int64, n), make([]int64, n)
	reasons, attempts := make([]string, n), make([]int32, n)
	for i, s := range done {
		if err := s.Effect.Validate(); err != nil {
			return err
		}
		if s.Attempts < 0 {
			return fmt.Errorf("%w: outbox: effect %s settled with %d attempts", ErrInvalidArgument, s.Effect.Key(), s.Attempts)
		}
		res[i], toks[i], seqs[i] = s.Effect.Resource, int64(s.Effect.Token), s.Effect.Seq
		reasons[i], attempts[i] = s.Parked, int32(min(s.Attempts, 1<<31-1))
	}
	return o.fences.RunInTx(ctx, o.db, by.Resource, by.Token, func(tx pgx.Tx) error {
		if n == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, o.sql.settle, res, toks, seqs, reasons, attempts, int64(by.Token))
		return err
	})
}

// Parked returns up to limit parked effects in scope, in the order they
// were recorded, with their reasons and attempts; see [outbox.Requeuer].
// Arguments are checked as by [Outbox.Pending]. ctx bounds the call.
func (o *Outbox) Parked(ctx context.Context, scope outbox.Scope, limit int) ([]outbox.Parked, error) {
	p, i, err := o.checkRead(ctx, scope, limit)
	if err != nil {
		return nil, err
	}
	rows, _ := o.db.Query(ctx, o.sql.parked, p, i, limit)
	parked, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Parked, error) {
		var x outbox.Parked
		var attempts int32
		err := r.Scan(&x.Effect.Resource, &x.Effect.Token, &x.Effect.Seq, &x.Effect.Destination, &x.Effect.Payload,
			&x.Reason, &attempts)
		x.Attempts = int(attempts)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read parked effects of %s: %w", o.label, classify(err))
	}
	return parked, nil
}

// Requeue makes the parked effect e (found by its Resource, Token and Seq)
// pending again, at its place in the order; its attempts are kept until
// the next Settle. An effect that is not parked gets an error matching
// [fence.ErrNotFound]. It is one statement of its own: a lost answer gives
// an error matching [fence.ErrUnknownOutcome]. ctx bounds the call.
func (o *Outbox) Requeue(ctx context.Context, e outbox.Effect) error {
	if err := cmp.Or(o.check(), checkCtx(ctx)); err != nil {
		return err
	}
	if e.Resource == "" || !e.Token.Valid() || e.Seq < 0 {
		return fmt.Errorf("%w: outbox: Requeue needs an effect's Resource, Token and Seq, got %q, %d, %d",
			ErrInvalidArgument, e.Resource, e.Token, e.Seq)
	}
	return withConn(ctx, o.db, func(c DB) error {
		tag, err := c.Exec(ctx, o.sql.requeue, e.Resource, int64(e.Token), e.Seq)
		if err != nil {
			return writeError(c, "requeue effect on", e.Resource, e.Token, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: outbox %s: no parked effect %s (resource %q, token %d, seq %d)",
				fence.ErrNotFound, o.label, e.Key(), e.Resource, e.Token, e.Seq)
		}
		return nil
	})
}
