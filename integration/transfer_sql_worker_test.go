package integration_test

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver

	"github.com/fencelock/fencelock/etcdlock"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// The transfer of TestTransferFrozenHolderLiveness on MariaDB, through
// fence/sql.
const (
	// xferSQLHeld runs the transfer in sqlfence's RunInTxHeld over the
	// MultiLock: both fences raised before anything is read.
	xferSQLHeld xferMode = "fence/sql transaction claiming both first"
	// xferSQLHeldWaiting is xferSQLHeld WithoutPreemption (the control).
	xferSQLHeldWaiting xferMode = "fence/sql transaction claiming both first, without preemption"
)

// transferSQL moves amount from one account to the other under m's
// tokens, in one fenced transaction of fence/sql on db, calling between
// after the debit.
func transferSQL(ctx context.Context, db *sql.DB, mode xferMode, m *etcdlock.MultiLock, from, to string, amount int64, between func() error) error {
	f, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		return err
	}
	var opts []sqlfence.TxOption
	switch mode {
	case xferSQLHeld:
	case xferSQLHeldWaiting:
		opts = append(opts, sqlfence.WithoutPreemption())
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return f.RunInTxHeld(ctx, db, m, func(tx *sql.Tx) error {
		var a, b int64
		if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ?", from).Scan(&a); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ?", to).Scan(&b); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = ?", a-amount, from); err != nil {
			return err
		}
		if err := between(); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = ?", b+amount, to)
		return err
	}, opts...)
}
