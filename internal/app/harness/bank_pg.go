package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// errNoAccount is a transfer's read that found no account row.
var errNoAccount = errors.New("harness: no such account")

// transferPG makes t in one PostgreSQL transaction, after both accounts'
// guard checks: it reads both balances, debits From, holds (where the
// nemesis pauses or kills the worker, its transaction open and From's row
// locked), credits To, and logs the transfer in harness_bank_log.
//
// Fenced, the reads are Table.GetForUpdate, in key order (two transfers
// between the same accounts then wait for each other, not deadlock): each
// claims its row for the account's token and locks it to the end of the
// transaction, so a newer holder's read waits for this transaction, and
// reads what it committed. The debit is an expression update
// (postgres.Add), and the credit is computed from the claimed read.
//
// The control is the code a user writes today: plain SELECTs, then
// Table.Update of the computed balances, fenced writes of unfenced reads.
// A newer holder's SELECT does not wait for the paused holder's row lock:
// it reads the balance from before the paused transfer, waits at its
// write for the row lock, and then overwrites the paused holder's
// committed transfer.
func (b *bankStores) transferPG(ctx context.Context, t check.Transfer, from, to *fence.Guard) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return from.Do(ctx, func(ctx context.Context, ft fence.Token) error {
		return to.Do(ctx, func(ctx context.Context, tt fence.Token) error {
			tok := map[string]fence.Token{t.From: ft, t.To: tt}
			return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return b.movePG(ctx, tx, t, tok) })
		})
	})
}

// movePG is transferPG's transaction.
func (b *bankStores) movePG(ctx context.Context, tx pgx.Tx, t check.Transfer, tok map[string]fence.Token) error {
	bal, err := b.readPG(ctx, tx, t, tok)
	if err != nil {
		return err
	}
	debit := postgres.Set("balance", bal[t.From]-t.Amount)
	if b.fenced {
		debit = postgres.Add("balance", -t.Amount)
	}
	if err := b.table.Update(ctx, tx, t.From, tok[t.From], debit); err != nil {
		return err
	}
	b.hold()
	if err := b.table.Update(ctx, tx, t.To, tok[t.To], postgres.Set("balance", bal[t.To]+t.Amount)); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO "+bankLogTable+" (xfer, src, dst, amount) VALUES ($1, $2, $3, $4)", t.ID, t.From, t.To, t.Amount)
	return err
}

// readPG reads both accounts' balances: fenced, claiming the rows in key
// order; in the control, with plain SELECTs.
func (b *bankStores) readPG(ctx context.Context, tx pgx.Tx, t check.Transfer, tok map[string]fence.Token) (map[string]int64, error) {
	accts := []string{t.From, t.To}
	if t.To < t.From {
		accts[0], accts[1] = t.To, t.From
	}
	bal := map[string]int64{}
	for _, acct := range accts {
		var v int64
		var err error
		if b.fenced {
			err = b.table.GetForUpdate(ctx, tx, acct, tok[acct], []string{"balance"}, &v)
		} else {
			err = tx.QueryRow(ctx, "SELECT balance FROM "+bankTable+" WHERE key = $1", acct).Scan(&v)
		}
		if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, postgres.ErrRowNotFound) {
			return nil, fmt.Errorf("%w: %s", errNoAccount, acct)
		}
		if err != nil {
			return nil, err
		}
		bal[acct] = v
	}
	return bal, nil
}
