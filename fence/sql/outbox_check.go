package sqlfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/fencelock/fencelock/fence/outbox"
)

// Check tells, at a dispatcher's start, whether the server grants what it
// needs: reading and marking the outbox's effects, and reading, inserting
// and raising rows of the fence table (its own fence). In MySQL, MariaDB
// and PostgreSQL it runs, in a transaction it rolls back, statements of
// each kind that match no row, which the server refuses without the
// privilege; an error matching [outbox.ErrNotPermitted], with the
// server's words, says which. SQLite has no privileges: there it only
// reads both tables. A missing table gives an error matching [ErrSchema].
// ctx bounds the call.
func (o *Outbox) Check(ctx context.Context, scope outbox.Scope) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := scope.Validate(); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	probes := []string{
		"SELECT id FROM " + o.name + " WHERE 1 = 0",
		"SELECT token FROM " + o.f.name + " WHERE 1 = 0",
	}
	if o.d == SQLite {
		return o.probe(ctx, o.db, probes)
	}
	probes = append(probes,
		"UPDATE "+o.name+" SET attempts = attempts WHERE 1 = 0",
		"UPDATE "+o.f.name+" SET token = token WHERE 1 = 0",
		"INSERT INTO "+o.f.name+" (resource, token) SELECT resource, token FROM "+o.f.name+" WHERE 1 = 0")
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.refused("begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	return o.probe(ctx, tx, probes)
}

// probe runs each statement; a refusal for want of a privilege is
// reported as [outbox.ErrNotPermitted].
func (o *Outbox) probe(ctx context.Context, db DB, probes []string) error {
	for _, p := range probes {
		_, err := db.ExecContext(ctx, p)
		if err == nil {
			continue
		}
		return o.refused(p, err)
	}
	return nil
}

// refused is the error of Check's statement what: [outbox.ErrNotPermitted]
// for want of a privilege (a login refused too), the classified error
// otherwise.
func (o *Outbox) refused(what string, err error) error {
	if o.d.denied(err) {
		return fmt.Errorf("%w: %s: %w", outbox.ErrNotPermitted, what, err)
	}
	return fmt.Errorf("sqlfence: outbox check: %s: %w", what, o.d.classify(err))
}

// denied reports whether err is the server's refusal for want of a
// privilege (or, in SQLite, of a read-only or unauthorised database).
func (d Dialect) denied(err error) bool {
	var me *mysql.MySQLError
	var se sqliteError
	var pe sqlStateError
	switch {
	case d == MySQL && errors.As(err, &me):
		switch me.Number {
		case 1044, 1045, 1142, 1143, 1227: // access denied: database, user, table, column, operation
			return true
		}
	case d == SQLite && errors.As(err, &se):
		c := se.Code() & 0xff
		return c == 8 || c == 23 // SQLITE_READONLY, SQLITE_AUTH
	case d == PostgreSQL && errors.As(err, &pe):
		return pe.SQLState() == "42501" // insufficient_privilege
	}
	return false
}
