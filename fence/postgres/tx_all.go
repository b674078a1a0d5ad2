package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/pgtag"
)

// RunInTxAll runs fn in a transaction fenced on every claim's resource in
// the [DefaultFenceTable]; see [Fences.RunInTxAll].
func RunInTxAll(ctx context.Context, db TxBeginner, claims []fence.Claim, fn func(pgx.Tx) error, opts ...TxOption) error {
	return defaultFences().RunInTxAll(ctx, db, claims, fn, opts...)
}

// RunInTxHeld runs fn in a transaction fenced on everything h holds in the
// [DefaultFenceTable]; see [Fences.RunInTxHeld].
func RunInTxHeld(ctx context.Context, db TxBeginner, h fence.Claimer, fn func(pgx.Tx) error, opts ...TxOption) error {
	return defaultFences().RunInTxHeld(ctx, db, h, fn, opts...)
}

// RunInTxHeld is [Fences.RunInTxAll] over h.Claims(): one claim per
// resource h holds, such as an *etcdlock.MultiLock's locks, each with its
// own token. A nil h (a typed nil too) is refused with an error matching
// [ErrInvalidArgument] before any I/O; so is an h that holds nothing.
func (f *Fences) RunInTxHeld(ctx context.Context, db TxBeginner, h fence.Claimer, fn func(pgx.Tx) error, opts ...TxOption) error {
	if err := f.check(); err != nil {
		return err
	}
	if nilcheck.IsNil(h) {
		return fmt.Errorf("%w: RunInTxHeld: nil holder", ErrInvalidArgument)
	}
	return f.runInTxAll(ctx, db, h.Claims(), holderValid(h), fn, opts)
}

// RunInTxAll is [Fences.RunInTx] over several resources, each with its own
// token, as a transfer between two accounts needs: it begins a transaction
// on db, raises every claim's resource to its token in one statement
// before fn runs, runs fn and commits. If any resource is already higher,
// it rolls back and returns a [*fence.StaleError] naming the first such
// resource (Current filled), without calling fn: none of fn's writes, and
// none of the other claims, land.
//
// The resources are raised in one fixed order (sorted by name, whatever
// the order of claims), so two transactions that claim the same resources
// in opposite orders never deadlock on them: the second waits for the
// first. Until the transaction ends, every fenced transaction on any of its
// resources waits for it. A resource claimed twice with the same token is
// taken once; with two tokens, the call is refused.
//
// The token of a transaction whose claims all carry one token is recorded
// for the row trigger of [Table.CreateTrigger], as [Fences.RunInTx] does;
// with several tokens no single one applies, and the trigger checks
// nothing: write such rows with [Table.Update] and their own resource's
// token, which checks the row's fence column itself.
//
// Everything else is as for [Fences.RunInTx]: fn's error or panic rolls
// back, an error carrying a serialization failure or deadlock matches
// [ErrRetryable], a COMMIT whose answer was lost gives an error matching
// [fence.ErrUnknownOutcome] (a [*fence.UnknownOutcomeError] whose Resource
// lists the resources and whose Token is the first one's), ctx bounds the
// call, and a pgx.Tx as db gives a savepoint. No claims, a claim with an
// empty resource or a token that is not positive, a nil db or fn, or an
// invalid option fails before any I/O with an error matching
// [fence.ErrInvalidArgument].
func (f *Fences) RunInTxAll(ctx context.Context, db TxBeginner, claims []fence.Claim, fn func(pgx.Tx) error, opts ...TxOption) error {
	return f.runInTxAll(ctx, db, claims, nil, fn, opts)
}

// runInTxAll is RunInTxAll; valid, when not nil, tells whether the holder
// of the claims still holds them all (see waiter).
func (f *Fences) runInTxAll(ctx context.Context, db TxBeginner, claims []fence.Claim, valid func() bool, fn func(pgx.Tx) error, opts []TxOption) error {
	if err := cmp.Or(f.check(), checkDB(db)); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	set, err := sortClaims(claims)
	if err == nil {
		err = checkCtx(ctx)
	}
	if err != nil {
		return err
	}
	o, err := txOptions(db, opts)
	if err != nil {
		return err
	}
	label := claimsLabel(set)
	p := preemption{after: o.preemptAfter, w: waiterOf(set, valid), rows: f.xmaxSQL, rowKeys: claimNames(set)}
	p.pool, _ = db.(*pgxpool.Pool)
	return f.tel.write(ctx, f.tel.Tx, set[0].Token, func() string { return label }, func(ctx context.Context) error {
		return runInTx(ctx, db, label, set[0].Token, o.pgx, p, fn, func(tx pgx.Tx) error {
			return f.advanceAll(ctx, tx, set, label)
		})
	})
}

// sortClaims is [fence.SortClaims], its refusals matching this package's
// ErrInvalidArgument too.
func sortClaims(claims []fence.Claim) ([]fence.Claim, error) {
	set, err := fence.SortClaims(claims)
	if err != nil && !errors.Is(err, fence.ErrInvalidKey) && !errors.Is(err, fence.ErrInvalidToken) {
		err = fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return set, err
}

// claimNames returns the resources of set.
func claimNames(set []fence.Claim) []string {
	names := make([]string, len(set))
	for i, c := range set {
		names[i] = c.Resource
	}
	return names
}

// claimsLabel names the resources of sorted claims in errors and spans.
func claimsLabel(set []fence.Claim) string {
	names := make([]string, len(set))
	for i, c := range set {
		names[i] = c.Resource
	}
	return strings.Join(names, ", ")
}

// advanceAll is RunInTxAll's guard, run first in tx: it raises the fences
// of set, sorted, or returns the error of the first one refused.
func (f *Fences) advanceAll(ctx context.Context, tx pgx.Tx, set []fence.Claim, label string) error {
	names := make([]string, len(set))
	tokens := make([]int64, len(set))
	one := true
	for i, c := range set {
		names[i], tokens[i] = c.Resource, int64(c.Token)
		one = one && c.Token == set[0].Token
	}
	lo, hi := slices.Min(tokens), slices.Max(tokens)
	entries := make([]string, len(set))
	for i, c := range set {
		entries[i] = pgtag.Entry(c.Resource, int64(c.Token))
	}
	rows, _ := tx.Query(ctx, f.advanceAllSQL, names, tokens, one, tagOf(tx, lo, hi, strings.Join(entries, ";")))
	raised, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var name string
		return name, r.Scan(&name, nil)
	})
	if err != nil {
		return writeError(tx, "advance fences", label, set[0].Token, err)
	}
	if len(raised) == len(set) {
		return nil
	}
	for _, c := range set {
		if !slices.Contains(raised, c.Resource) {
			return f.stale(ctx, tx, c.Resource, c.Token)
		}
	}
	return nil
}

// advanceAllGuard builds RunInTxAll's guard on the fence table quoted q:
// $1 the resources, $2 their tokens, raised in the order given (the
// executor inserts, and so locks, the rows in the order the SELECT yields
// them), each only if not above its token; it returns the resources it
// raised. With $3 true (one token for all) it records the token for the
// row trigger, as the guard of RunInTx does. $4, the tag of the claims
// (tagOf), tags the transaction for newer holders it may block
// (preempt.go), before it waits for any row.
func advanceAllGuard(q string) string {
	return "INSERT INTO " + q + " AS cur (resource, token)" +
		" SELECT r, t FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS c(r, t, i) WHERE " +
		setTag(4) + " IS NOT NULL ORDER BY i" +
		" ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE cur.token <= EXCLUDED.token" +
		" RETURNING resource, CASE WHEN $3::bool THEN set_config('" + tokenSetting + "', token::text, true) END"
}
