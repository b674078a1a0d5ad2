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

// Beginner is what [Withdraw] needs from a pgx handle: *pgxpool.Pool and
// *pgx.Conn implement it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Withdraw takes amount from account id with token, a read-compute-write
// in one transaction: [Claim] (the row's fence raised to the token, the
// row locked until the commit), the check, [SetBalance], the COMMIT. It
// returns [ErrInsufficientFunds] when the balance is below amount, the
// claim's and the write's errors as [Fenced] gives them, and a COMMIT
// sent whose answer was lost as an error matching fence.ErrUnknownOutcome.
// On every error but that one nothing was written. The context bounds the
// whole transaction.
func Withdraw(ctx context.Context, b Beginner, token fence.Token, id string, amount int64) error {
	if err := check(ctx, token, b != nil); err != nil {
		return err
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("sqlcbank: begin: %w", err)
	}
	// After a commit, Rollback does nothing; after an error it ends the
	// transaction, even when ctx has ended.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := db.New(tx)
	acct, err := Claim(ctx, q, token, id)
	if err != nil {
		return inTx(err)
	}
	if acct.Balance < amount {
		return fmt.Errorf("%w: %q holds %d, %d asked", ErrInsufficientFunds, id, acct.Balance, amount)
	}
	if err := SetBalance(ctx, q, token, id, acct.Balance-amount); err != nil {
		return inTx(err)
	}
	return postgres.WriteError(id, token, tx.Commit(ctx))
}

// inTx turns an unknown outcome of a statement inside Withdraw's
// transaction into a known failure: Withdraw never commits after a failed
// statement, so nothing of it can land. Only the COMMIT's lost answer is
// an unknown outcome.
func inTx(err error) error {
	var u *fence.UnknownOutcomeError
	if errors.As(err, &u) {
		return fmt.Errorf("sqlcbank: statement in the transaction on %q failed; rolled back, nothing written: %w", u.Resource, u.Err)
	}
	return err
}
