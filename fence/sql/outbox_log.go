package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// Pending returns up to limit effects in scope that are neither delivered
// nor parked, whose resource is not in skip, in the order they were
// recorded (the table's id): see [outbox.Log]. It reads what is committed
// and locks nothing. A limit below 1 or an invalid scope is refused with
// [ErrInvalidArgument] before any I/O. ctx bounds the call.
func (o *Outbox) Pending(ctx context.Context, scope outbox.Scope, skip []string, limit int) ([]outbox.Effect, error) {
	if err := o.checkRead(ctx, scope, limit); err != nil {
		return nil, err
	}
	s := &stmt{d: o.d}
	s.sql("SELECT resource, token, seq, destination, payload FROM ", o.name, " WHERE settled_at IS NULL")
	o.inScope(s, scope)
	if len(skip) > 0 {
		s.sql(" AND resource NOT IN (")
		for i, r := range skip {
			if i > 0 {
				s.sql(", ")
			}
			s.arg(r)
		}
		s.sql(")")
	}
	s.sql(" ORDER BY id LIMIT ").arg(limit)
	var out []outbox.Effect
	err := o.query(ctx, "read pending effects", s, func(rows *sql.Rows) error {
		var e outbox.Effect
		err := rows.Scan(&e.Resource, &e.Token, &e.Seq, &e.Destination, &e.Payload)
		out = append(out, e)
		return err
	})
	return out, err
}

// Parked returns up to limit parked effects in scope, in the order they
// were recorded, with their reasons and attempts: see
// [outbox.Requeuer]. Arguments are checked as by [Outbox.Pending]. ctx
// bounds the call.
func (o *Outbox) Parked(ctx context.Context, scope outbox.Scope, limit int) ([]outbox.Parked, error) {
	if err := o.checkRead(ctx, scope, limit); err != nil {
		return nil, err
	}
	s := &stmt{d: o.d}
	s.sql("SELECT resource, token, seq, destination, payload, parked_reason, attempts FROM ", o.name, " WHERE parked_reason IS NOT NULL")
	o.inScope(s, scope)
	s.sql(" ORDER BY id LIMIT ").arg(limit)
	var out []outbox.Parked
	err := o.query(ctx, "read parked effects", s, func(rows *sql.Rows) error {
		var p outbox.Parked
		e := &p.Effect
		err := rows.Scan(&e.Resource, &e.Token, &e.Seq, &e.Destination, &e.Payload, &p.Reason, &p.Attempts)
		out = append(out, p)
		return err
	})
	return out, err
}

// Requeue makes the parked effect e (its Resource, Token and Seq) pending
// again, at its place in its resource's order (its id does not change),
// keeping its count of attempts. An effect that is not parked gets an
// error matching [fence.ErrNotFound]. It is an operator's action, not
// fenced. When no answer came back, the error matches
// [fence.ErrUnknownOutcome]. ctx bounds the call.
func (o *Outbox) Requeue(ctx context.Context, e outbox.Effect) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := outboxcodec.CheckRequeue(ctx, e, ErrInvalidArgument); err != nil {
		return err
	}
	s := &stmt{d: o.d}
	s.sql("UPDATE ", o.name, " SET settled_at = NULL, parked_reason = NULL, delivered_by = NULL WHERE resource = ").arg(e.Resource).
		sql(" AND token = ").arg(int64(e.Token)).sql(" AND seq = ").arg(e.Seq).sql(" AND parked_reason IS NOT NULL")
	// Sent once (sendOnce): a copy sent again after the first landed
	// would find the effect no longer parked, and say so.
	return sendOnce(ctx, o.d, o.db, func(db DB) error {
		res, err := db.ExecContext(ctx, s.String(), s.args...)
		if err != nil {
			return o.d.writeError(db, "requeue effect "+e.Key()+" on", e.Resource, e.Token, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: effect %s (resource %q, token %d, seq %d) is not parked in %s", fence.ErrNotFound, e.Key(), e.Resource, e.Token, e.Seq, o.label)
		}
		return nil
	})
}

// Settle records, in one fenced transaction on by.Resource with by.Token
// (a row of the Outbox's [Fences], raised as [Fences.RunInTx] raises it),
// that each of done was delivered (Parked empty) or parked: see
// [outbox.Log]. A token below by.Resource's fence is refused with a
// [*fence.StaleError] and nothing is marked; with no effects it only
// raises the fence, as a dispatcher taking over does. The effects are
// marked by one UPDATE per way of marking them (delivered, or parked with
// one reason and count of attempts) and per 100 effects, not one per
// effect. An effect already settled, or not recorded, is passed over; one
// given twice counts once, as the first says. Errors are those of
// [Fences.RunInTx]: when the COMMIT got no answer, one matching
// [fence.ErrUnknownOutcome]. An empty by.Resource, a token <= 0 or an
// effect with an empty Resource, a token <= 0 or a negative Seq is
// refused before any I/O. ctx bounds the call.
func (o *Outbox) Settle(ctx context.Context, by fence.Claim, done []outbox.Settled) error {
	if err := o.check(); err != nil {
		return err
	}
	for _, s := range done {
		if err := checkIdentity(s.Effect); err != nil {
			return err
		}
	}
	groups := settleGroups(done)
	return o.f.runInTx(ctx, o.f.tel.Tx, o.db, by.Resource, by.Token, func(tx *sql.Tx) error {
		for _, g := range groups {
			if err := o.settle(ctx, tx, by.Token, g); err != nil {
				return err
			}
		}
		return nil
	}, nil)
}

// settleMax is the most effects one of Settle's statements marks: 3
// placeholders each, well within SQLite's oldest limit of 999.
const settleMax = 100

// settleGroups splits done, each effect once (the first time it is
// given), into groups marked the same way (delivered, or parked with one
// reason and count of attempts) of at most settleMax effects, each
// Settle's one statement.
func settleGroups(done []outbox.Settled) [][]outbox.Settled {
	type mark struct {
		parked   string
		attempts int
	}
	var order []mark
	byMark := map[mark][]outbox.Settled{}
	for _, d := range outboxcodec.Unique(done) {
		m := mark{d.Parked, d.Attempts}
		if _, ok := byMark[m]; !ok {
			order = append(order, m)
		}
		byMark[m] = append(byMark[m], d)
	}
	var out [][]outbox.Settled
	for _, m := range order {
		for g := byMark[m]; len(g) > 0; g = g[min(settleMax, len(g)):] {
			out = append(out, g[:min(settleMax, len(g))])
		}
	}
	return out
}

// settle marks, in the dispatcher's transaction, the effects of g (one of
// settleGroups) that are recorded and not settled yet, in one statement.
func (o *Outbox) settle(ctx context.Context, tx *sql.Tx, by fence.Token, g []outbox.Settled) error {
	var reason any // NULL: delivered
	if g[0].Parked != "" {
		reason = g[0].Parked
	}
	st := &stmt{d: o.d}
	st.sql("UPDATE ", o.name, " SET settled_at = ", o.d.now(), ", delivered_by = ").arg(int64(by)).
		sql(", parked_reason = ").arg(reason).sql(", attempts = ").arg(g[0].Attempts).
		sql(" WHERE settled_at IS NULL AND (")
	for i, d := range g {
		if i > 0 {
			st.sql(" OR ")
		}
		e := d.Effect
		st.sql("(resource = ").arg(e.Resource).sql(" AND token = ").arg(int64(e.Token)).sql(" AND seq = ").arg(e.Seq).sql(")")
	}
	st.sql(")")
	if _, err := tx.ExecContext(ctx, st.String(), st.args...); err != nil {
		return fmt.Errorf("sqlfence: settle %d effects (the first %s) in %s: %w", len(g), g[0].Effect.Key(), o.label, o.d.classify(err))
	}
	return nil
}

// checkRead checks Pending's and Parked's arguments.
func (o *Outbox) checkRead(ctx context.Context, scope outbox.Scope, limit int) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	return outboxcodec.CheckList(scope, limit, ErrInvalidArgument)
}

// inScope adds the condition of scope's partition to s's WHERE clause.
func (o *Outbox) inScope(s *stmt, scope outbox.Scope) {
	if scope.Partitions > 1 {
		s.sql(" AND hash % ").arg(int64(scope.Partitions)).sql(" = ").arg(int64(scope.Index))
	}
}

// query runs s and calls scan for each row.
func (o *Outbox) query(ctx context.Context, what string, s *stmt, scan func(*sql.Rows) error) error {
	rows, err := o.db.QueryContext(ctx, s.String(), s.args...)
	if err != nil {
		return fmt.Errorf("sqlfence: %s in %s: %w", what, o.label, o.d.classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("sqlfence: %s in %s: %w", what, o.label, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlfence: %s in %s: %w", what, o.label, o.d.classify(err))
	}
	return nil
}

// checkIdentity checks the fields that name an effect of Settle's: its
// Resource, Token and Seq.
func checkIdentity(e outbox.Effect) error {
	switch {
	case e.Resource == "":
		return fmt.Errorf("%w: outbox: effect with an empty resource", fence.ErrInvalidKey)
	case !e.Token.Valid():
		return fmt.Errorf("outbox: effect on %q: %w (got %d)", e.Resource, fence.ErrInvalidToken, e.Token)
	case e.Seq < 0:
		return fmt.Errorf("%w: outbox: effect on %q: negative Seq %d", ErrInvalidArgument, e.Resource, e.Seq)
	}
	return nil
}
