package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// A counter kept in the Store, incremented by read-modify-write: the
// holder of token 7 counts twice; then the holder of token 5, paused past
// its lease, tries, and is refused before its function runs.
func ExampleStore_Update() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if err := postgres.CreateSchema(ctx, pool); err != nil {
		log.Fatal(err)
	}
	store, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		log.Fatal(err)
	}
	increment := func(old fence.Record) ([]byte, error) {
		if old.Value == nil { // the key holds no value yet
			return []byte("1"), nil
		}
		n, err := strconv.Atoi(string(old.Value))
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(n+1), 10), nil
	}
	for range 2 {
		if err := store.Update(ctx, "visits", 7, increment); err != nil {
			log.Fatal(err)
		}
	}
	err = store.Update(ctx, "visits", 5, increment)
	fmt.Println("token 5: stale:", errors.Is(err, fence.ErrStale))

	rec, err := store.Get(ctx, "visits")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("visits: %s (token %d)\n", rec.Value, rec.Token)
	// Output:
	// token 5: stale: true
	// visits: 2 (token 7)
}

// A transfer between two accounts, each guarded by its own lock and token:
// both fences are raised first, in a fixed order, then the source is read
// the fenced way and both balances change in the server.
func ExampleRunInTxAll() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if err := postgres.CreateSchema(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (
		id      text PRIMARY KEY,
		balance bigint NOT NULL,
		fence   bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000), ('acct-B', 1000)`); err != nil {
		log.Fatal(err)
	}
	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		log.Fatal(err)
	}
	errInsufficientFunds := errors.New("insufficient funds")

	transfer := func(from, to fence.Claim, amount int64) error {
		return postgres.RunInTxAll(ctx, pool, []fence.Claim{from, to}, func(tx pgx.Tx) error {
			var balance int64
			err := accounts.GetForUpdate(ctx, tx, from.Resource, from.Token, []string{"balance"}, &balance)
			if err != nil {
				return err
			}
			if balance < amount {
				return errInsufficientFunds
			}
			if err := accounts.Update(ctx, tx, from.Resource, from.Token, postgres.Add("balance", -amount)); err != nil {
				return err
			}
			return accounts.Update(ctx, tx, to.Resource, to.Token, postgres.Add("balance", amount))
		})
	}
	a, b := fence.Claim{Resource: "acct-A", Token: 2}, fence.Claim{Resource: "acct-B", Token: 3}
	fmt.Println("A to B, 100:", transfer(a, b, 100))
	fmt.Println("B to A, 5000:", transfer(b, a, 5000))
	oldA := fence.Claim{Resource: "acct-A", Token: 1}
	fmt.Println("A to B with an older token: stale:", errors.Is(transfer(oldA, b, 10), fence.ErrStale))

	var balA, balB int64
	if err := pool.QueryRow(ctx, "SELECT (SELECT balance FROM accounts WHERE id = 'acct-A'), (SELECT balance FROM accounts WHERE id = 'acct-B')").Scan(&balA, &balB); err != nil {
		log.Fatal(err)
	}
	fmt.Println("A:", balA, "B:", balB)
	// Output:
	// A to B, 100: <nil>
	// B to A, 5000: insufficient funds
	// A to B with an older token: stale: true
	// A: 900 B: 1100
}
