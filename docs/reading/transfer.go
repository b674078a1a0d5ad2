package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence/postgres"
)

// transfer moves 100 from acct-A to acct-B in one transaction fenced on
// both accounts' locks, their floors kept in fencelock's fence table.
func transfer(ctx context.Context, locks *etcdlock.Client, pool *pgxpool.Pool) error {
	m, err := locks.LockAll(ctx, []string{"acct-A", "acct-B"}, etcdlock.WithWait(10*time.Second))
	if err != nil {
		return err
	}
	defer unlock(ctx, m)

	return postgres.RunInTxHeld(ctx, pool, m, func(tx pgx.Tx) error {
		// Both floors are raised, in name order, before this runs: an older
		// holder's transaction on either account has committed (and is read
		// below) or will be refused.
		var a int64
		if err := tx.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 'acct-A'`).Scan(&a); err != nil {
			return err
		}
		if a < 100 {
			return errInsufficientFunds // rolls back; nothing written
		}
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 100 WHERE id = 'acct-A'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 100 WHERE id = 'acct-B'`)
		return err
	})
}

// transferClaimed moves 100 from acct-A to acct-B, each row claimed with
// its own lock's token as it is read, in the row's own fence column.
func transferClaimed(ctx context.Context, locks *etcdlock.Client, pool *pgxpool.Pool, accounts *postgres.Table) error {
	m, err := locks.LockAll(ctx, []string{"acct-A", "acct-B"}, etcdlock.WithWait(10*time.Second))
	if err != nil {
		return err
	}
	defer unlock(ctx, m)
	tokA, tokB := m.Lock("acct-A").Token(), m.Lock("acct-B").Token()

	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var a, b int64 // rows claimed in one fixed order, by key
		if err := accounts.GetForUpdate(ctx, tx, "acct-A", tokA, []string{"balance"}, &a); err != nil {
			return err
		}
		if err := accounts.GetForUpdate(ctx, tx, "acct-B", tokB, []string{"balance"}, &b); err != nil {
			return err
		}
		if a < 100 {
			return errInsufficientFunds // rolls back; the claims too
		}
		if err := accounts.Update(ctx, tx, "acct-A", tokA, postgres.Add("balance", -100)); err != nil {
			return err
		}
		return accounts.Update(ctx, tx, "acct-B", tokB, postgres.Add("balance", 100))
	})
}
