package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// Record records effects in tx, the fenced transaction of the state change
// they belong to (the *sql.Tx that [Fences.RunInTx], [Fences.RunInTxAll]
// or [Fences.RunInTxHeld] gives its function, where [Table] writes in the
// same transaction go too), in the order given: they exist if and only if
// tx commits, and a dispatcher delivers each resource's effects in the
// order they were recorded.
//
// Each effect is inserted only while the fence table holds its Resource
// at exactly its Token, a condition the statement itself checks (reading
// the fence row with a shared lock in MySQL and PostgreSQL); so an
// effect belongs to a resource the transaction claimed, with the token it
// claimed it with, or to none. Otherwise nothing more is recorded and the
// error matches [ErrNotClaimed].
//
// Before any I/O, effects are checked with [outbox.ValidateAll] (errors
// matching [fence.ErrInvalidArgument], [outbox.ErrNoDestination],
// [outbox.ErrDuplicate]), and a payload over the Outbox's limit
// ([WithMaxPayload]) is refused with [outbox.ErrTooLarge]. An effect
// already recorded (its Resource, Token and Seq) gives an error matching
// [outbox.ErrDuplicate]: after a fenced transaction whose outcome was
// unknown, it tells its retry that the first one committed. Return any
// error from the fenced function so that the transaction rolls back: the
// effects recorded before it would otherwise commit without the rest.
// With no effects it does nothing. ctx bounds the call.
func (o *Outbox) Record(ctx context.Context, tx *sql.Tx, effects ...outbox.Effect) error {
	if err := o.checkRecord(ctx, tx, effects); err != nil {
		return err
	}
	for _, e := range effects {
		if err := o.insert(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}

// checkRecord checks Record's arguments, before any I/O.
func (o *Outbox) checkRecord(ctx context.Context, tx *sql.Tx, effects []outbox.Effect) error {
	if err := o.check(); err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: Record: nil *sql.Tx (effects are recorded in the fenced transaction of their state change)", ErrInvalidArgument)
	}
	if err := outbox.ValidateAll(effects, nil); err != nil {
		return err
	}
	for _, e := range effects {
		if len(e.Payload) > o.maxPayload {
			return fmt.Errorf("%w: effect %s on %q: payload of %d bytes, over the outbox's %d", outbox.ErrTooLarge, e.Key(), e.Resource, len(e.Payload), o.maxPayload)
		}
	}
	return checkCtx(ctx)
}

// insert records one effect, if the fence row holds its resource at its
// token.
func (o *Outbox) insert(ctx context.Context, tx *sql.Tx, e outbox.Effect) error {
	payload := e.Payload
	if payload == nil {
		payload = []byte{}
	}
	s := &stmt{d: o.d}
	s.sql("INSERT INTO ", o.name, " (resource, token, seq, hash, destination, payload) SELECT resource, token, ").
		arg(e.Seq).sql(", ").arg(int64(outbox.Hash(e.Resource))).sql(", ").arg(e.Destination).sql(", ").arg(payload).
		sql(" FROM ", o.f.name, " WHERE resource = ").arg(e.Resource).sql(" AND token = ").arg(int64(e.Token))
	switch o.d {
	case MySQL:
		// A read of the fence row that a newer holder's raise waits for,
		// whatever the isolation level; in READ COMMITTED, INSERT ...
		// SELECT would otherwise not lock it.
		s.sql(" LOCK IN SHARE MODE")
	case PostgreSQL:
		s.sql(" FOR SHARE")
	}
	res, err := tx.ExecContext(ctx, s.String(), s.args...)
	if err != nil {
		if o.d.duplicate(err) {
			return fmt.Errorf("%w: effect %s (resource %q, token %d, seq %d) in %s: %w", outbox.ErrDuplicate, e.Key(), e.Resource, e.Token, e.Seq, o.label, err)
		}
		return o.d.writeError(tx, "record effect "+e.Key()+" on", e.Resource, e.Token, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return o.notClaimed(ctx, tx, e)
	}
	return nil
}

// notClaimed is the error of an effect whose insert found no fence row
// holding its resource at its token: it names the fence's token, if any.
func (o *Outbox) notClaimed(ctx context.Context, tx *sql.Tx, e outbox.Effect) error {
	cur, err := o.f.current(ctx, tx, e.Resource)
	switch {
	case errors.Is(err, fence.ErrNotFound):
		return fmt.Errorf("%w: effect %s: no fence for %q in %s (raise it first in the transaction: Fences.RunInTx)", ErrNotClaimed, e.Key(), e.Resource, o.f.label)
	case err != nil:
		return fmt.Errorf("%w: effect %s: the fence of %q is not at token %d (reading it failed: %w)", ErrNotClaimed, e.Key(), e.Resource, e.Token, err)
	}
	return fmt.Errorf("%w: effect %s: the fence of %q is at token %d, not the effect's %d", ErrNotClaimed, e.Key(), e.Resource, cur, e.Token)
}

// duplicate reports whether err is the server's refusal of a row that
// breaks a unique constraint.
func (d Dialect) duplicate(err error) bool {
	var me *mysql.MySQLError
	var se sqliteError
	var pe sqlStateError
	switch {
	case d == MySQL && errors.As(err, &me):
		return me.Number == 1062 // ER_DUP_ENTRY
	case d == SQLite && errors.As(err, &se):
		return se.Code() == 2067 || se.Code() == 1555 // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY
	case d == PostgreSQL && errors.As(err, &pe):
		return pe.SQLState() == "23505"
	}
	return false
}
