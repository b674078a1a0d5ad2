package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// The bank's PostgreSQL tables: the accounts, written through
// fence/postgres's Table, and the log of transfers, written in the
// transaction that moves the money, which is the database's own record of
// what every account must hold.
const (
	bankTable    = "harness_bank"
	bankLogTable = "harness_bank_log"
)

var bankSchema = []string{
	`CREATE TABLE IF NOT EXISTS ` + bankTable + ` (key text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
	`CREATE TABLE IF NOT EXISTS ` + bankLogTable + ` (
		id bigserial PRIMARY KEY, xfer text NOT NULL, src text NOT NULL, dst text NOT NULL, amount bigint NOT NULL)`,
}

// setUpBank creates the bank's tables and opens every account (the run's
// keys) at check.BankStart in every store, with token 1: before any
// worker starts, so that a transfer finds its accounts, and below every
// lock's token (a revision of the run's etcd cluster, which is past 1).
func setUpBank(ctx context.Context, r *runner) error {
	for _, stmt := range bankSchema {
		if _, err := r.pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("harness: bank schema: %w", err)
		}
	}
	t, err := postgres.NewTable(pgx.Identifier{bankTable})
	if err != nil {
		return err
	}
	kv, closeKV, err := r.bankKV()
	if err != nil {
		return err
	}
	defer closeKV()
	start, _ := json.Marshal(account{Balance: check.BankStart, Ops: []check.BankOp{}}) // always marshals
	for _, acct := range r.keys {
		if err := t.Upsert(ctx, r.pool, acct, 1, postgres.Set("balance", check.BankStart)); err != nil {
			return fmt.Errorf("harness: opening account %s: %w", acct, err)
		}
		for kind, st := range kv {
			if err := st.Put(ctx, bankKey(acct), 1, start); err != nil {
				return fmt.Errorf("harness: opening account %s on %s: %w", acct, kind, err)
			}
		}
	}
	return nil
}

// bankKV opens the bank's KV stores from the runner, through a client of
// the etcd members themselves (not a worker's proxies); closeKV closes
// the clients.
func (r *runner) bankKV() (kv map[check.ResKind]bankKV, closeKV func(), err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: r.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	c, closeIdle := r.srv.S3.NewClient()
	closeKV = func() { closeIdle(); _ = cli.Close() }
	if kv, err = newBankKV(cli, c, r.srv.S3.Bucket); err != nil {
		closeKV()
		return nil, nil, err
	}
	return kv, closeKV, nil
}

// readBank reads every bank store's ledger.
func (r *runner) readBank(ctx context.Context) (map[check.ResKind]*check.Ledger, error) {
	pg, err := readBankPG(ctx, r.pool, r.keys)
	if err != nil {
		return nil, err
	}
	kv, closeKV, err := r.bankKV()
	if err != nil {
		return nil, err
	}
	defer closeKV()
	ledgers := map[check.ResKind]*check.Ledger{check.ResBankPG: pg}
	for kind, st := range kv {
		if ledgers[kind], err = readBankKV(ctx, st, r.keys); err != nil {
			return nil, fmt.Errorf("harness: reading the bank on %s: %w", kind, err)
		}
	}
	return ledgers, nil
}

// readBankPG reads the accounts' balances and the log in one
// REPEATABLE READ snapshot, so that a read made while the workers still
// write sees every transfer whole or not at all, and every transfer
// acknowledged before it began. A logged transfer is two operations, one
// on each of its accounts.
func readBankPG(ctx context.Context, pool *pgxpool.Pool, accounts []string) (*check.Ledger, error) {
	l := check.NewLedger()
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, pool, opts, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, "SELECT key, balance FROM "+bankTable+" WHERE key = ANY($1)", accounts)
		var acct string
		var bal int64
		if _, err := pgx.ForEachRow(rows, []any{&acct, &bal}, func() error { l.Balance[acct] = bal; return nil }); err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, "SELECT xfer, src, dst, amount FROM "+bankLogTable+" WHERE src = ANY($1) ORDER BY id", accounts)
		var t check.Transfer
		_, err := pgx.ForEachRow(rows, []any{&t.ID, &t.From, &t.To, &t.Amount}, func() error {
			l.Ops[t.From] = append(l.Ops[t.From], check.BankOp{ID: t.ID, Amount: -t.Amount})
			l.Ops[t.To] = append(l.Ops[t.To], check.BankOp{ID: t.ID, Amount: t.Amount})
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("harness: reading the bank on PostgreSQL: %w", err)
	}
	for _, acct := range accounts {
		if _, ok := l.Balance[acct]; !ok {
			return nil, fmt.Errorf("harness: reading the bank on PostgreSQL: %w: %s", errNoAccount, acct)
		}
	}
	return l, nil
}

// readBankKV reads each account's record, balance and operations, from
// st (a linearizable read on etcd, a GET on S3).
func readBankKV(ctx context.Context, st bankKV, accounts []string) (*check.Ledger, error) {
	l := check.NewLedger()
	for _, acct := range accounts {
		rec, err := st.Get(ctx, bankKey(acct))
		if err != nil {
			return nil, err
		}
		var a account
		if err := json.Unmarshal(rec.Value, &a); err != nil {
			return nil, fmt.Errorf("account %s: %q: %w", acct, rec.Value, err)
		}
		l.Balance[acct], l.Ops[acct] = a.Balance, a.Ops
	}
	return l, nil
}
