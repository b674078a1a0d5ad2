package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
)

// IssuerColumn is the column of a [Store]'s table that records the issuer
// of the tokens each key has accepted ([fence.IssuerNamer]). It is
// optional, and [Store.CreateTable] does not make it: a table gets it with
//
//	ALTER TABLE fencelock_store ADD COLUMN issuer text;
//
// With it, a Put, Delete, GetForUpdate or Update whose context names an
// issuer (a [fence.Guard] of a holder that names one) is refused with
// [fence.ErrIssuerMismatch], changing nothing (an Update before its
// function runs), on a key whose issuer is another; a key whose issuer is
// NULL (written before the column, or by writes that name none) accepts
// it and records it. Without it, or for a write that names none, nothing
// is checked, as before, unless the Store was made with [RequireIssuer].
// A Store looks for the column once, at its first write that names an
// issuer; restart it after adding the column. A Put or Delete that names
// an issuer and waits on a transaction holding its key's row ends it
// (see "A frozen holder" in the package doc) only while the key's
// committed issuer is its own: a blocker's tokens, of an issuer the
// waiter cannot see, are never compared with its own.
const IssuerColumn = "issuer"

// StoreOption configures a [Store]. Create one with [RequireIssuer] or
// any [Option] ([WithMeterProvider], [WithTracerProvider]); the interface
// is sealed.
type StoreOption interface{ applyStore(*storeOptions) }

// storeOptions are a Store's table options and its own.
type storeOptions struct {
	table      []TableOption
	needIssuer bool
}

type storeOptionFunc func(*storeOptions)

func (f storeOptionFunc) applyStore(o *storeOptions) { f(o) }

// RequireIssuer makes a [Store] refuse, before any I/O, every Put, Delete,
// GetForUpdate and Update whose context names no issuer: one not made
// through a [fence.Guard] whose holder names its tokens' source
// ([fence.IssuerNamer]). The error matches [fence.ErrIssuerRequired] and
// [fence.ErrInvalidArgument] and says what to add; nothing changes. Use it
// on a table that two lock services' holders may write, where a write
// that names none could be compared with either's tokens. The table must
// have the [IssuerColumn]: without it, the first write fails with an
// error matching [ErrSchema] that says how to add it. Default: a write
// that names none is compared by token alone.
func RequireIssuer() StoreOption {
	return storeOptionFunc(func(o *storeOptions) { o.needIssuer = true })
}

// Issuer-column states of a Store, found once.
const (
	issuerUnknown int32 = iota
	issuerPresent
	issuerAbsent
)

// needsIssuer refuses, before any I/O, a write of key whose ctx names no
// issuer when the Store requires one ([RequireIssuer]).
func (s *Store) needsIssuer(ctx context.Context, key string) error {
	if !s.needIssuer {
		return nil
	}
	if _, err := fence.NeedIssuer(ctx); err != nil {
		return fmt.Errorf("postgres: %s/%s: %w", s.table.label, key, err)
	}
	return nil
}

// issuerOf returns the issuer the write's ctx names when the Store's
// table records issuers, else "". A Store that requires issuers fails
// when its table has no IssuerColumn, and looks again at its next write:
// the column added meanwhile is found without a restart.
func (s *Store) issuerOf(ctx context.Context) (string, error) {
	iss := fence.IssuerFromContext(ctx)
	if iss == "" {
		return "", nil
	}
	switch s.issuerCol.Load() {
	case issuerAbsent:
		return "", s.noIssuerColumn()
	case issuerPresent:
		return iss, nil
	}
	var present bool
	err := s.db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped)",
		s.table.name, IssuerColumn).Scan(&present)
	if err != nil {
		return "", fmt.Errorf("postgres: looking for %s.%s: %w", s.table.label, IssuerColumn, classify(err))
	}
	switch {
	case present:
		s.issuerCol.Store(issuerPresent)
	case !s.needIssuer: // writes go on without issuers: the look is kept
		s.issuerCol.Store(issuerAbsent)
	}
	if !present {
		return "", s.noIssuerColumn()
	}
	return iss, nil
}

// noIssuerColumn is the error of a write to a Store that requires
// issuers on a table without the IssuerColumn, or nil when it does not
// require them.
func (s *Store) noIssuerColumn() error {
	if !s.needIssuer {
		return nil
	}
	return fmt.Errorf("%w: the Store requires issuers (RequireIssuer) and %s has no column %s to record them; ALTER TABLE %s ADD COLUMN %s text (nothing written)",
		ErrSchema, s.table.label, IssuerColumn, s.table.name, IssuerColumn)
}

// issuerSQL is the upsert of cols that also refuses a key whose issuer is
// another: upsertSQL's conflict condition, and the issuer's.
func (t *Table) issuerSQL(cols []column) string {
	return t.upsertSQL(cols) + " AND (cur." + IssuerColumn + " IS NULL OR cur." + IssuerColumn + " = EXCLUDED." + IssuerColumn + ")"
}

// mismatch turns err, the refusal of a write of iss's token to key, into
// an error matching [fence.ErrIssuerMismatch] when the key's issuer is
// another: the write changed nothing either way; the read names why.
func (s *Store) mismatch(ctx context.Context, key string, token fence.Token, iss string, err error) error {
	if !errors.Is(err, fence.ErrStale) {
		return err
	}
	var cur *string
	if rerr := s.db.QueryRow(ctx, s.issuerReadSQL, key).Scan(&cur); rerr != nil || cur == nil || *cur == iss {
		return err
	}
	return fmt.Errorf("%w: %s/%s has accepted tokens of %q; this write's token %d is of %q", fence.ErrIssuerMismatch, s.table.label, key, *cur, token, iss)
}

// sameIssuer is the preemption vet of a write of key that names iss: a
// blocker's tag shows its tokens, not their issuer, and tokens of two
// issuers are not compared, so the write ends a blocker of older tokens
// only while the key's issuer, as committed, is iss. A key whose issuer is
// another refuses the write anyway; one whose issuer is NULL may be
// claimed by a blocker of any issuer, whose tokens say nothing to iss's,
// so such a blocker is waited for, as one that is no fenced transaction.
func (s *Store) sameIssuer(key, iss string) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		var cur *string
		if err := conn.QueryRow(ctx, s.issuerReadSQL, key).Scan(&cur); err != nil && !isNoRows(err) {
			return fmt.Errorf("reading the issuer of %s/%s: %w", s.table.label, key, err)
		}
		if cur == nil || *cur != iss {
			return fmt.Errorf("%s/%s's issuer is not this write's %q (yet): blockers' tokens, of an issuer unknown, were not compared with its", s.table.label, key, iss)
		}
		return nil
	}
}

// issuerClaimSQL is the claim ([Store.GetForUpdate]) that also records
// the claim's issuer ($3) and refuses a key whose issuer is another.
func issuerClaimSQL(q string) string {
	return "INSERT INTO " + q + " AS cur (key, token, value, " + IssuerColumn + ") VALUES ($1, $2, NULL, $3)" +
		" ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, " + IssuerColumn + " = EXCLUDED." + IssuerColumn +
		" WHERE cur.token <= EXCLUDED.token AND (cur." + IssuerColumn + " IS NULL OR cur." + IssuerColumn + " = EXCLUDED." + IssuerColumn + ")" +
		" RETURNING value, value IS NULL"
}

// issuerGetSQL is getSQL with the key's issuer ("" for NULL).
func issuerGetSQL(q string) string {
	return "SELECT value, token, value IS NULL, coalesce(" + IssuerColumn + ", '') FROM " + q + " WHERE key = $1"
}
