// Command quickstart is the README's Quickstart: it takes the lock
// "billing-run" on etcd and, holding it, sets the balance of account acct-7
// in PostgreSQL with a write that PostgreSQL refuses if a newer holder of
// the lock has written since.
//
// It reads the etcd endpoints from ETCDCTL_ENDPOINTS (default
// localhost:2379) and the database from DATABASE_URL (empty: the PG*
// variables libpq reads). The table is in schema.sql.
package main

import (
	"cmp"
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	cli, err := clientv3.New(clientv3.Config{ // you own TLS, auth and endpoints
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCDCTL_ENDPOINTS"), "localhost:2379"), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // clientv3's own JSON warnings at shutdown look like failures
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

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		return err
	}
	return billingRun(ctx, locks, pool, accounts)
}

func billingRun(ctx context.Context, locks *etcdlock.Client, pool *pgxpool.Pool, accounts *postgres.Table) error {
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds the wait for the lock, not the work
	defer cancel()
	lock, err := locks.Lock(waitCtx, "billing-run") // or TryLock: fails at once with etcdlock.ErrLocked
	if err != nil {
		return err
	}
	defer func() {
		// Bounded (etcd may be unreachable), and not by ctx, which may have
		// ended. Compare-and-delete: never removes another holder's key; if
		// it fails, the client keeps retrying in the background.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lock.Unlock(ctx); err != nil { // errors.Is(err, etcdlock.ErrLost): lost before release
			log.Printf("unlock %s: %v", lock.Name(), err)
		}
	}()

	guard, err := fence.NewGuard(lock)
	if err != nil {
		return err
	}
	err = guard.Do(ctx, func(ctx context.Context, token fence.Token) error { // ctx, not waitCtx
		return accounts.Update(ctx, pool, "acct-7", token, postgres.Set("balance", 120))
	})
	switch {
	case errors.Is(err, fence.ErrStale): // a newer holder wrote first; nothing changed. Don't retry.
	case errors.Is(err, fence.ErrLockLost): // we already knew the lock was gone; nothing was sent.
	case errors.Is(err, fence.ErrUnknownOutcome): // no answer from PostgreSQL; read back before deciding.
	case err == nil:
		log.Printf("balance set, token %d", lock.Token())
	}
	return err
}
