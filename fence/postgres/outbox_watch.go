package postgres

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence/outbox"
)

// Watch listens (LISTEN) on the outbox's channel, on a connection of its
// own, and returns a channel that receives a value, without blocking
// (capacity one), after a transaction that recorded an effect in scope
// commits ([Outbox.Record] notifies); see [outbox.Watcher]. The LISTEN is
// in place when Watch returns. The channel is closed, and the connection
// with it, when ctx ends or the connection breaks.
//
// The connection is taken out of the Outbox's *pgxpool.Pool (Acquire,
// then Hijack, so that the pool makes another), or dialled anew with the
// config of its *pgx.Conn; any other handle is refused with an error
// matching [ErrInvalidArgument], as is an invalid scope, before any I/O.
func (o *Outbox) Watch(ctx context.Context, scope outbox.Scope) (<-chan struct{}, error) {
	if err := cmp.Or(o.check(), checkCtx(ctx), scope.Validate()); err != nil {
		return nil, err
	}
	if scope.Partitions == 0 {
		scope = outbox.All
	}
	conn, err := o.dial(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{o.channel}.Sanitize()); err != nil {
		closeConn(ctx, conn)
		return nil, fmt.Errorf("postgres: outbox %s: listen on %q: %w", o.label, o.channel, classify(err))
	}
	ch := make(chan struct{}, 1)
	go watch(ctx, conn, scope, ch)
	return ch, nil
}

// dial returns a connection of Watch's own.
func (o *Outbox) dial(ctx context.Context) (*pgx.Conn, error) {
	switch db := o.db.(type) {
	case *pgxpool.Pool:
		c, err := db.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("postgres: outbox %s: acquire a connection to listen on: %w", o.label, err)
		}
		return c.Hijack(), nil
	case *pgx.Conn:
		c, err := pgx.ConnectConfig(ctx, db.Config())
		if err != nil {
			return nil, fmt.Errorf("postgres: outbox %s: connect to listen: %w", o.label, err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("%w: Outbox.Watch needs a *pgxpool.Pool or *pgx.Conn, the Outbox has %T", ErrInvalidArgument, o.db)
}

// watch passes conn's notifications in scope on to ch until ctx ends or
// conn breaks, then closes conn and ch.
func watch(ctx context.Context, conn *pgx.Conn, scope outbox.Scope, ch chan<- struct{}) {
	defer close(ch)
	defer closeConn(ctx, conn)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		if notified(n.Payload, scope) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// notified reports whether a notification of Record names a resource in
// scope (a hash in it, or "*").
func notified(payload string, scope outbox.Scope) bool {
	if scope.Partitions == 1 || payload == "*" {
		return true
	}
	for h := range strings.SplitSeq(payload, ",") {
		v, err := strconv.ParseInt(h, 10, 64)
		if err != nil || v%int64(scope.Partitions) == int64(scope.Index) {
			return true // an unreadable payload wakes: a poll costs little
		}
	}
	return false
}

func closeConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}

// Check returns an error matching [outbox.ErrNotPermitted], naming the
// role and what it lacks, unless the current role may read and mark
// effects (SELECT and UPDATE on the outbox table) and raise the
// dispatcher's fence (SELECT, INSERT and UPDATE on the fence table); see
// [outbox.Checker]. A table that does not exist gives an error matching
// [ErrSchema]. scope is checked, and otherwise not used: the grants are
// per table. ctx bounds the call.
func (o *Outbox) Check(ctx context.Context, scope outbox.Scope) error {
	if err := cmp.Or(o.check(), checkCtx(ctx), scope.Validate()); err != nil {
		return err
	}
	var role string
	var missing []string
	err := o.db.QueryRow(ctx, o.sql.privileges, o.sql.table, o.fences.quoted).Scan(&role, &missing)
	if err != nil {
		return fmt.Errorf("postgres: outbox %s: check privileges: %w", o.label, classify(err))
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: postgres: role %q lacks %s (GRANT them to it)", outbox.ErrNotPermitted, role, strings.Join(missing, ", "))
	}
	return nil
}
