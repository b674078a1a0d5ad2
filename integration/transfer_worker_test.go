package integration_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// xferWorkerEnv, when set in the environment of this test binary, makes it
// run as the first holder of TestTransferPausedHolder. Its value is the
// JSON of an xferWorkerConfig.
const xferWorkerEnv = "FENCELOCK_IT_XFER_WORKER"

// xferWorkerConfig tells a transfer worker where everything is.
type xferWorkerConfig struct {
	Etcd []string
	DSN  string
	From string
	To   string
	Mode xferMode
	TTL  time.Duration // the lease; 0: 1 s
	// MySQL, when set, is the DSN of a MariaDB database the transfer runs
	// on, through fence/sql, instead of PostgreSQL's DSN.
	MySQL string
}

func init() {
	if cfg := os.Getenv(xferWorkerEnv); cfg != "" {
		os.Exit(workerMain(cfg, xferWorkerRun))
	}
}

// xferWorkerRun takes both accounts' locks and transfers 100 from From to
// To; after the debit, with the transaction open and the debited row
// locked, it reports "READY <token>" and waits for the parent, which stops
// it meanwhile past its lease.
func xferWorkerRun(ctx context.Context, cfg xferWorkerConfig) error {
	locks, stop, err := workerLocksTTL(ctx, cfg.Etcd, cmp.Or(cfg.TTL, time.Second))
	if err != nil {
		return err
	}
	defer stop()
	if cfg.MySQL != "" {
		return xferSQLWorkerRun(ctx, locks, cfg)
	}
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m, err := locks.LockAll(ctx, []string{cfg.From, cfg.To})
	if err != nil {
		return err
	}
	return transfer(ctx, conn, cfg.Mode, m, cfg.From, cfg.To, 100, func() error {
		return readyThenWait(m.Lock(cfg.From).Token())
	})
}

// xferSQLWorkerRun is xferWorkerRun on MariaDB.
func xferSQLWorkerRun(ctx context.Context, locks *etcdlock.Client, cfg xferWorkerConfig) error {
	db, err := sql.Open("mysql", cfg.MySQL)
	if err != nil {
		return err
	}
	defer db.Close()
	m, err := locks.LockAll(ctx, []string{cfg.From, cfg.To})
	if err != nil {
		return err
	}
	return transferSQL(ctx, db, cfg.Mode, m, cfg.From, cfg.To, 100, func() error {
		return readyThenWait(m.Lock(cfg.From).Token())
	})
}

// xferMode is how a transfer reads and writes the accounts.
type xferMode string

const (
	// xferRows reads each row with Table.GetForUpdate (claiming it) and
	// writes the balances computed from the reads with Table.Update: the
	// control's writes, only the reads claimed.
	xferRows xferMode = "rows claimed as read"
	// xferRowsWaiting is xferRows through a Table WithoutPreemption: its
	// claims wait for an older holder's open transaction as long as that
	// stays open (the control of the liveness tests).
	xferRowsWaiting xferMode = "rows claimed as read, without preemption"
	// xferHeld runs the transfer in postgres.RunInTxHeld over the
	// MultiLock: both floors claimed before anything is read.
	xferHeld xferMode = "transaction claiming both first"
	// xferHeldWaiting is xferHeld WithoutPreemption: its guard waits for
	// an older holder's open transaction as long as that stays open (the
	// control of the liveness tests).
	xferHeldWaiting xferMode = "transaction claiming both first, without preemption"
	// xferPlainRead is the code users wrote before: a plain SELECT, then
	// fenced writes of the computed balances (the control).
	xferPlainRead xferMode = "plain read, fenced writes"
)

// transfer moves amount from one account to the other under m's tokens,
// calling between after the debit, inside the open transaction.
func transfer(ctx context.Context, db pgHandle, mode xferMode, m *etcdlock.MultiLock, from, to string, amount int64, between func() error) error {
	opts := []postgres.TableOption{postgres.WithKeyColumn("id")}
	if mode == xferRowsWaiting {
		opts = append(opts, postgres.WithoutPreemption())
	}
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, opts...)
	if err != nil {
		return err
	}
	tokFrom, tokTo := m.Lock(from).Token(), m.Lock(to).Token()
	switch mode {
	case xferHeld, xferHeldWaiting:
		var opts []postgres.TxOption
		if mode == xferHeldWaiting {
			opts = append(opts, postgres.WithoutPreemption())
		}
		return postgres.RunInTxHeld(ctx, db, m, func(tx pgx.Tx) error {
			var a, b int64
			if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", from).Scan(&a); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", to).Scan(&b); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = $2 WHERE id = $1", from, a-amount); err != nil {
				return err
			}
			if err := between(); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = $2 WHERE id = $1", to, b+amount)
			return err
		}, opts...)
	case xferRows, xferRowsWaiting, xferPlainRead:
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			a, b, err := readBalances(ctx, tx, accounts, mode, from, to, tokFrom, tokTo)
			if err != nil {
				return err
			}
			if err := accounts.Update(ctx, tx, from, tokFrom, postgres.Set("balance", a-amount)); err != nil {
				return err
			}
			if err := between(); err != nil {
				return err
			}
			return accounts.Update(ctx, tx, to, tokTo, postgres.Set("balance", b+amount))
		})
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// readBalances reads both balances in key order: claimed (xferRows) or
// with plain SELECTs (the control).
func readBalances(ctx context.Context, tx pgx.Tx, accounts *postgres.Table, mode xferMode, from, to string, tokFrom, tokTo fence.Token) (a, b int64, err error) {
	read := func(id string, tok fence.Token, dst *int64) error {
		if mode != xferPlainRead {
			return accounts.GetForUpdate(ctx, tx, id, tok, []string{"balance"}, dst)
		}
		return tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", id).Scan(dst)
	}
	first, second := from, to
	fa, fb := &a, &b
	ta, tb := tokFrom, tokTo
	if to < from {
		first, second, fa, fb, ta, tb = to, from, &b, &a, tokTo, tokFrom
	}
	if err := read(first, ta, fa); err != nil {
		return 0, 0, err
	}
	return a, b, read(second, tb, fb)
}
