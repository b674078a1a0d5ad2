package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// RunInTxAll is [Fences.RunInTx] over several resources, each with its own
// token: the transaction of a transfer between two accounts, each guarded
// by its own lock. It begins a transaction on db, raises every claim's
// fence, then runs fn and commits. If any fence is already higher, it
// rolls back and returns that claim's [*fence.StaleError] without calling
// fn: nothing fn would write can land.
//
// The fences are raised in the order of their resource names (byte by
// byte), whatever the order of claims: two transactions over the same
// resources, a transfer from A to B and one from B to A, take the fence
// rows in the same order, so they wait for each other instead of
// deadlocking. Until the transaction ends, fenced transactions on any of
// its resources wait for it, so what fn reads of the rows those resources
// stand for (written only by such transactions) is what the last one
// committed, and no older holder's transaction can commit over it.
//
// A claim repeated with the same token is taken once; a resource claimed
// with two tokens, an empty list, an empty resource or a token <= 0 are
// refused before any I/O with an error matching [ErrInvalidArgument]
// (fence.ErrInvalidKey and fence.ErrInvalidToken for the last two).
// claims is not modified.
//
// Retries, fn's errors and panics, and unknown outcomes (a COMMIT that got
// no answer: [fence.ErrUnknownOutcome], the error's Resource listing the
// resources and its Token the first one's, in name order) are as for
// RunInTx. A deadlock while raising the fences (in MySQL two first claims
// of new resources can deadlock on InnoDB's gap locks) is retried with
// the transaction, before fn runs. ctx bounds the call.
func (f *Fences) RunInTxAll(ctx context.Context, db TxBeginner, claims []fence.Claim, fn func(*sql.Tx) error, opts ...TxOption) error {
	if err := f.check(); err != nil {
		return err
	}
	cs, err := checkTxAll(ctx, db, claims, fn)
	if err != nil {
		return err
	}
	return f.runClaims(ctx, f.tel.Tx, db, cs, fn, opts)
}

// RunInTxHeld is [Fences.RunInTxAll] over c.Claims(), one claim per
// resource c holds, such as an etcdlock *MultiLock's locks (the resources
// are the lock names), each with its own token. A nil c (a typed nil too)
// is refused with [ErrInvalidArgument] before any I/O, and so is one that
// holds nothing.
func (f *Fences) RunInTxHeld(ctx context.Context, db TxBeginner, c fence.Claimer, fn func(*sql.Tx) error, opts ...TxOption) error {
	if nilcheck.IsNil(c) {
		return fmt.Errorf("%w: RunInTxHeld: nil holder", ErrInvalidArgument)
	}
	return f.RunInTxAll(ctx, db, c.Claims(), fn, opts...)
}

// claims is what a fenced transaction raises: one claim per resource,
// sorted by resource.
type claims []fence.Claim

// label names the resources, for errors and spans.
func (cs claims) label() string {
	if len(cs) == 1 {
		return cs[0].Resource
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Resource
	}
	return strings.Join(names, ", ")
}

// token is the first claim's token: the one a fenced transaction's span
// and unknown outcome carry.
func (cs claims) token() fence.Token { return cs[0].Token }

// checkTxAll checks RunInTxAll's arguments and returns its claims sorted,
// each resource once.
func checkTxAll(ctx context.Context, db TxBeginner, in []fence.Claim, fn func(*sql.Tx) error) (claims, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	cs, err := sortClaims(in)
	if err != nil {
		return nil, err
	}
	return cs, checkCtx(ctx)
}

// sortClaims is [fence.SortClaims], its refusals matching this package's
// ErrInvalidArgument too.
func sortClaims(in []fence.Claim) (claims, error) {
	set, err := fence.SortClaims(in)
	if err != nil && !errors.Is(err, fence.ErrInvalidKey) && !errors.Is(err, fence.ErrInvalidToken) {
		err = fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return set, err
}
