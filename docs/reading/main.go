// Command reading runs docs/reading.md's examples, each a function of this
// program, against your etcd and PostgreSQL:
//
//	go run ./docs/reading held      # the transfer in one transaction, RunInTxHeld
//	go run ./docs/reading claimed   # the transfer, each row claimed as it is read
//	go run ./docs/reading kv        # the transfer on etcd keys, UpdateHeld
//	go run ./docs/reading counter   # a counter on an etcd key, Guard.Update
//
// It reads the etcd endpoints from ETCDCTL_ENDPOINTS (default
// localhost:2379) and the database from DATABASE_URL (empty: the PG*
// variables libpq reads), as the README's Quickstart does. held and claimed
// need the accounts table of schema.sql; held also needs fencelock's own
// fence table, which it creates if it is missing (postgres.CreateSchema).
// Each run moves 100 from acct-A to acct-B and prints both balances.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"
)

// errInsufficientFunds is the transfer's own refusal: returned from the
// transaction's function, it rolls the transaction back and nothing is
// written.
var errInsufficientFunds = errors.New("insufficient funds")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: reading held|claimed|kv|counter")
		os.Exit(2)
	}
	if err := run(ctx, os.Args[1]); err != nil {
		log.Fatal(err)
	}
}

// unlock releases a hold (an *etcdlock.Lock or *etcdlock.MultiLock),
// bounded: etcd may be unreachable, and ctx may have ended, so the release
// has a context of its own. Compare-and-delete: it never removes another
// holder's key; if it fails, the client keeps retrying in the background.
func unlock(ctx context.Context, held interface{ Unlock(context.Context) error }) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := held.Unlock(ctx); err != nil { // errors.Is(err, etcdlock.ErrLost): lost before release
		log.Printf("unlock: %v", err)
	}
}
