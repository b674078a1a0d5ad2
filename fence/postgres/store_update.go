package postgres

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate returns the record under key after raising the key's floor
// to token, in one statement, so that from then on every write to key with
// a lower token is refused; the record's Token is token. A key with no
// value (never written, or deleted) is claimed too, with a tombstone as
// [Store.Delete] leaves, and the error matches [fence.ErrNotFound]. When
// the key holds a higher token it returns a [*fence.StaleError] (Current
// filled) and changes nothing. See [fence.Updater].
//
// The claim commits by itself unless the Store's handle is a pgx.Tx: then
// it lands, and the row stays locked, until that transaction ends. Outside
// a transaction, a key whose floor is token already (the holder claimed it
// before) is only read, with a plain SELECT: no write, nothing to commit,
// one round trip; the first claim is that SELECT, then the statement that
// raises the floor. An empty
// key or a token that is not positive is refused before any I/O. ctx
// bounds the call; a claim whose answer was lost (the connection broke or
// ctx ended mid-request) gives an error matching [fence.ErrUnknownOutcome]:
// the floor may have been raised. On a table made before tombstones (value
// NOT NULL) it fails with an error matching [ErrSchema], as [Store.Delete]
// does, which says how to allow them.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkUpdate(ctx, key, token, noFunc); err != nil {
		return fence.Record{}, err
	}
	rec, absent, err := s.claim(ctx, key, token)
	if err == nil && absent {
		err = fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return rec, err
}

// Update writes fn(old) under key with token, where old is the record
// under key (the zero Record when the key holds no value), unless the
// record changed in between. It claims key as [Store.GetForUpdate] does (a
// newer holder's token refuses it with a [*fence.StaleError] before fn
// runs), calls fn, then writes, in one statement, only if the key still
// holds token and the value fn was given. Between the two, an older
// holder's write is refused by the claim; a write with the same token (the
// holder's own, concurrent) makes Update read and call fn again, up to
// [fence.UpdateAttempts] times, then fail with an error matching
// [fence.ErrConflict]. A nil value from fn is stored as an empty one, as
// by [Store.Put]. See [fence.Updater].
//
// fn runs with no row lock held and no transaction open (unless the
// Store's handle is a pgx.Tx), so it may use the Store itself. An error
// from fn is returned as it is and a panic in fn is passed on; either way
// nothing of fn's is written, but the claim stays: the key's floor is
// token. A nil fn, an empty key or a token that is not positive is refused
// before any I/O. ctx bounds the call (one that ends while fn runs ends
// it with ctx's error, nothing of fn's sent); a statement whose answer was
// lost gives an error matching [fence.ErrUnknownOutcome], as for
// [Store.Put]; other errors are those of [Store.GetForUpdate]. It is
// [fence.RunUpdate] over the claim and a conditional write.
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkUpdate(ctx, key, token, fn); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}

// rounds is a Store's [fence.UpdateRounds]: its Update is fence's loop
// over the claim and the swap.
type rounds Store

// read is what a claim read, which the swap compares: the value, or none.
type read struct {
	value  []byte
	absent bool
}

// ClaimRead is the claim.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, read, error) {
	rec, absent, err := (*Store)(r).claim(ctx, key, token)
	// The swap's condition is a copy: fn may compute its value in
	// rec.Value's own bytes.
	return rec, read{value: bytes.Clone(rec.Value), absent: absent}, err
}

// WriteIf is the swap: v lands only if the key still holds token and the
// value read.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, old read, v []byte) error {
	done, err := (*Store)(r).swap(ctx, key, token, old.value, old.absent, v)
	if !done && err == nil {
		return fence.ErrChanged
	}
	return err
}

// UpdateConflict names the table in the error of an Update that kept
// meeting writes with its token.
func (r *rounds) UpdateConflict(key string, _ fence.Token, _ error) error {
	return fmt.Errorf("%w: %q in %s after %d attempts", fence.ErrConflict, key, r.table.label, fence.UpdateAttempts)
}

// noFunc stands for the function GetForUpdate does not take.
func noFunc(fence.Record) ([]byte, error) { return nil, nil }

// checkUpdate checks the arguments of GetForUpdate (fn noFunc) and Update
// before any I/O, in the order of fence.CheckUpdate.
func (s *Store) checkUpdate(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := checkWrite(ctx, s.db, key, token); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Update: nil function", ErrInvalidArgument)
	}
	return s.needsIssuer(ctx, key)
}

// claim raises key's floor to token and returns its record, and whether
// the key holds no value (the zero Record then). In autocommit a key whose
// floor is token already is only read (see [Table.GetForUpdate]). A claim
// whose ctx names an issuer, on a table with the IssuerColumn, records it,
// and is refused on a key whose issuer is another.
func (s *Store) claim(ctx context.Context, key string, token fence.Token) (rec fence.Record, absent bool, err error) {
	iss, err := s.issuerOf(ctx)
	if err != nil {
		return fence.Record{}, false, err
	}
	err = withConn(ctx, s.db, func(c DB) error {
		if autocommit(c) {
			if done, err := s.readClaimed(ctx, c, key, token, iss, &rec, &absent); done {
				return err
			}
		}
		var err error
		if iss != "" {
			err = c.QueryRow(ctx, s.issuerClaimSQL, key, int64(token), iss).Scan(&rec.Value, &absent)
		} else {
			err = c.QueryRow(ctx, s.claimSQL, key, int64(token)).Scan(&rec.Value, &absent)
		}
		switch {
		case isNoRows(err): // the conflict's WHERE refused: a higher floor, or another issuer
			err = s.stale(ctx, c, key, token)
			if iss != "" {
				err = s.mismatch(ctx, key, token, iss, err)
			}
			return err
		case err != nil:
			return s.tombstoneErr(writeError(c, "claim", key, token, err))
		}
		return nil
	})
	if err != nil || absent {
		return fence.Record{}, absent, err
	}
	rec.Token = token
	return rec, false, nil
}

// readClaimed reads key's record into rec and absent when its floor is
// token already, and reports whether it decided the claim: it did not when
// the key has no row or a lower floor, which the claim then raises, nor
// when the claim names an issuer (iss) the key has not recorded. A read
// claims nothing: its failure is a definite one.
func (s *Store) readClaimed(ctx context.Context, c DB, key string, token fence.Token, iss string, rec *fence.Record, absent *bool) (bool, error) {
	var (
		cur    int64
		keyIss string
		err    error
	)
	if iss != "" {
		err = c.QueryRow(ctx, s.issuerGetSQL, key).Scan(&rec.Value, &cur, absent, &keyIss)
	} else {
		err = c.QueryRow(ctx, s.getSQL, key).Scan(&rec.Value, &cur, absent)
	}
	switch {
	case isNoRows(err):
		return false, nil
	case err != nil:
		return true, fmt.Errorf("postgres: fenced read of %q: %w", key, classify(err))
	case keyIss != "" && keyIss != iss:
		return true, fmt.Errorf("%w: %s/%s has accepted tokens of %q; this claim's token %d is of %q", fence.ErrIssuerMismatch, s.table.label, key, keyIss, token, iss)
	case fence.Token(cur) > token:
		return true, &fence.StaleError{Resource: key, Token: token, Current: fence.Token(cur)}
	}
	return fence.Token(cur) == token && keyIss == iss, nil
}

// swap writes v under key with token if the key still holds token and old
// (no value, when absent). It reports whether it wrote, and an error
// matching [fence.ErrStale] when a higher token is there now.
func (s *Store) swap(ctx context.Context, key string, token fence.Token, old []byte, absent bool, v []byte) (done bool, err error) {
	if v == nil {
		v = []byte{}
	}
	var prev any = old
	switch {
	case absent:
		prev = nil
	case old == nil:
		prev = []byte{}
	}
	err = withConn(ctx, s.db, func(c DB) error {
		tag, err := c.Exec(ctx, s.swapSQL, key, int64(token), v, prev)
		switch {
		case err != nil:
			return writeError(c, "update", key, token, err)
		case tag.RowsAffected() > 0:
			done = true
			return nil
		}
		if cur, ok := s.floor(ctx, c, key); ok && cur > token {
			return &fence.StaleError{Resource: key, Token: token, Current: cur}
		}
		return nil // changed by a writer with the same token: read again
	})
	return done, err
}

// stale is the error of a claim refused for a higher floor, with the floor
// when it can be read.
func (s *Store) stale(ctx context.Context, db DB, key string, token fence.Token) error {
	se := &fence.StaleError{Resource: key, Token: token}
	if cur, ok := s.floor(ctx, db, key); ok && cur > token {
		se.Current = cur
	}
	return se
}

// floor reads key's token, and whether it could.
func (s *Store) floor(ctx context.Context, db DB, key string) (fence.Token, bool) {
	var cur int64
	if err := db.QueryRow(ctx, s.floorSQL, key).Scan(&cur); err != nil {
		return 0, false
	}
	return fence.Token(cur), true
}
