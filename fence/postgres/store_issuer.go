package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// IssuerColumn is the column of a [Store]'s table that records the issuer
// of the tokens each key has accepted ([fence.IssuerNamer]). It is
// optional, and [Store.CreateTable] does not make it: a table gets it with
//
//	ALTER TABLE fencelock_store ADD COLUMN issuer text;
//
// With it, a Put or Delete whose context names an issuer (a [fence.Guard]
// of a holder that names one) is refused with [fence.ErrIssuerMismatch],
// changing nothing, on a key whose issuer is another; a key whose issuer
// is NULL (written before the column, or by writes that name none)
// accepts it and records it. Without it, or for a write that names none,
// nothing is checked, as before. Only Put and Delete check it:
// GetForUpdate and Update compare tokens alone. A Store looks for the
// column once, at its first write that names an issuer; restart it after
// adding the column.
const IssuerColumn = "issuer"

// Issuer-column states of a Store, found once.
const (
	issuerUnknown int32 = iota
	issuerPresent
	issuerAbsent
)

// issuerOf returns the issuer the write's ctx names when the Store's
// table records issuers, else "".
func (s *Store) issuerOf(ctx context.Context) (string, error) {
	iss := fence.IssuerFromContext(ctx)
	if iss == "" {
		return "", nil
	}
	switch s.issuerCol.Load() {
	case issuerAbsent:
		return "", nil
	case issuerPresent:
		return iss, nil
	}
	var present bool
	err := s.db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped)",
		s.table.name, IssuerColumn).Scan(&present)
	if err != nil {
		return "", fmt.Errorf("postgres: looking for %s.%s: %w", s.table.label, IssuerColumn, classify(err))
	}
	state := issuerAbsent
	if present {
		state = issuerPresent
	}
	s.issuerCol.Store(state)
	if !present {
		return "", nil
	}
	return iss, nil
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
	if rerr := s.db.QueryRow(ctx, "SELECT "+IssuerColumn+" FROM "+s.table.name+" WHERE key = $1", key).Scan(&cur); rerr != nil || cur == nil || *cur == iss {
		return err
	}
	return fmt.Errorf("%w: %s/%s has accepted tokens of %q; this write's token %d is of %q", fence.ErrIssuerMismatch, s.table.label, key, *cur, token, iss)
}
