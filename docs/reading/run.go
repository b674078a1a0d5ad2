package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/postgres"
)

// run connects to etcd and PostgreSQL and runs the example named by name.
func run(ctx context.Context, name string) error {
	example, ok := examples[name]
	if !ok {
		return fmt.Errorf("no example %q: want held, claimed, kv or counter", name)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCDCTL_ENDPOINTS"), "localhost:2379"), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(15*time.Second))
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())
	return example(ctx, env{cli: cli, locks: locks})
}

// env is what the examples share.
type env struct {
	cli   *clientv3.Client
	locks *etcdlock.Client
}

// examples are the page's examples, by the name the command line gives.
var examples = map[string]func(context.Context, env) error{
	"held":    runHeld,
	"claimed": runClaimed,
	"kv":      runKV,
	"counter": runCounter,
}

func runHeld(ctx context.Context, e env) error {
	pool, err := newPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := postgres.CreateSchema(ctx, pool); err != nil { // once, at deployment
		return err
	}
	if err := transfer(ctx, e.locks, pool); err != nil {
		return err
	}
	return printBalances(ctx, pool)
}

func runClaimed(ctx context.Context, e env) error {
	pool, err := newPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		return err
	}
	if err := transferClaimed(ctx, e.locks, pool, accounts); err != nil {
		return err
	}
	return printBalances(ctx, pool)
}

func runKV(ctx context.Context, e env) error {
	store, err := etcdfence.New(e.cli, "/reading/")
	if err != nil {
		return err
	}
	if err := transferKV(ctx, e.locks, store); err != nil {
		return err
	}
	for _, id := range []string{"acct-A", "acct-B"} {
		rec, err := store.Get(ctx, id)
		if err != nil {
			return err
		}
		log.Printf("%s: %s", id, rec.Value)
	}
	return nil
}

func runCounter(ctx context.Context, e env) error {
	store, err := etcdfence.New(e.cli, "/reading/")
	if err != nil {
		return err
	}
	n, err := countInvoice(ctx, e.locks, store)
	if err != nil {
		return err
	}
	log.Printf("invoices-sent: %d", n)
	return nil
}

func newPool(ctx context.Context) (*pgxpool.Pool, error) {
	return pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
}

func printBalances(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, "SELECT id, balance FROM accounts WHERE id IN ('acct-A', 'acct-B') ORDER BY id")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var balance int64
		if err := rows.Scan(&id, &balance); err != nil {
			return err
		}
		log.Printf("%s: %d", id, balance)
	}
	return rows.Err()
}
