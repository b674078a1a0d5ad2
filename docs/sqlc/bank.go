package sqlcbank

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/docs/sqlc/db"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// SetBalance writes balance to account id with token, one fenced UPDATE
// (SetBalanceFenced in query.sql). It returns nil when the write landed,
// and otherwise what [Fenced] says. The context bounds the statements; a
// context that ends mid-request leaves the outcome unknown.
func SetBalance(ctx context.Context, q *db.Queries, token fence.Token, id string, balance int64) error {
	if err := check(ctx, token, q != nil); err != nil {
		return err
	}
	n, err := q.SetBalanceFenced(ctx, db.SetBalanceFencedParams{ID: id, Balance: balance, Token: int64(token)})
	return Fenced(ctx, q, token, id, n, err)
}

// Put writes balance to account id with token, creating the account if it
// is missing: one fenced INSERT ... ON CONFLICT (PutAccountFenced in
// query.sql), whose update lands only while the row's fence is at most
// the token. Its errors are [Fenced]'s, except that it never returns
// [ErrNotFound].
func Put(ctx context.Context, q *db.Queries, token fence.Token, id string, balance int64) error {
	if err := check(ctx, token, q != nil); err != nil {
		return err
	}
	n, err := q.PutAccountFenced(ctx, db.PutAccountFencedParams{ID: id, Balance: balance, Token: int64(token)})
	return Fenced(ctx, q, token, id, n, err)
}

// Claim raises account id's fence to token and returns the account as it
// is then (ClaimAccount in query.sql, an UPDATE ... RETURNING): no write
// with an older token lands after it. Compute from what it returns, then
// write with the same token; in one transaction ([Withdraw]) the row stays
// locked from the claim to the commit. Its errors are [Fenced]'s.
func Claim(ctx context.Context, q *db.Queries, token fence.Token, id string) (db.Account, error) {
	if err := check(ctx, token, q != nil); err != nil {
		return db.Account{}, err
	}
	acct, err := q.ClaimAccount(ctx, db.ClaimAccountParams{ID: id, Token: int64(token)})
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Account{}, refused(ctx, q, token, id)
	}
	if err != nil {
		return db.Account{}, postgres.WriteError(id, token, err)
	}
	return acct, nil
}

// Fenced turns the result of one fenced statement on account id, the rows
// it changed and its error, into the error to return:
//
//   - err not nil: [postgres.WriteError]'s, which matches
//     fence.ErrUnknownOutcome when the statement was sent and its answer
//     lost (read the account back before deciding);
//   - one row: nil, the write landed;
//   - no row: it reads the account's fence (ReadFence in query.sql) and
//     returns a *fence.StaleError (errors.Is fence.ErrStale, Current the
//     fence) when the fence is above the token, an error matching
//     [ErrNotFound] when there is no account, [ErrChanged] otherwise.
//
// A refused write changed nothing; so did a failed read of the fence,
// whose error it returns.
func Fenced(ctx context.Context, q *db.Queries, token fence.Token, id string, rows int64, err error) error {
	switch {
	case err != nil:
		return postgres.WriteError(id, token, err)
	case rows == 1:
		return nil
	case rows == 0:
		return refused(ctx, q, token, id)
	}
	return fmt.Errorf("sqlcbank: write of %q changed %d rows, want at most 1: is id the primary key?", id, rows)
}

// refused tells why a fenced statement matched no row.
func refused(ctx context.Context, q *db.Queries, token fence.Token, id string) error {
	current, err := q.ReadFence(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	case err != nil:
		return fmt.Errorf("sqlcbank: write of %q with token %d changed nothing; reading its fence: %w", id, token, err)
	case current > int64(token):
		return &fence.StaleError{Resource: id, Token: token, Current: fence.Token(current)}
	}
	return fmt.Errorf("%w: %q is at fence %d, token %d; nothing written", ErrChanged, id, current, token)
}

// check refuses, before any I/O, a nil context, a nil handle (handled
// false), a token <= 0 and a context that has ended: pgx's pool reports
// an ended context before it sends anything, and WriteError, which cannot
// tell, would call it an unknown outcome.
func check(ctx context.Context, token fence.Token, handled bool) error {
	if ctx == nil || !handled {
		return fmt.Errorf("%w: sqlcbank: nil context or handle", fence.ErrInvalidArgument)
	}
	if err := token.Validate(); err != nil {
		return err
	}
	return ctx.Err()
}
