package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// examplePool returns a pool on a fresh database of the test server, and a
// function that closes the pool and drops the database.
func examplePool() (*pgxpool.Pool, func()) {
	ctx := context.Background()
	srv := pgtest.Shared()
	name, dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	return pool, func() {
		pool.Close()
		_ = srv.DropDatabase(ctx, name)
	}
}

// Two holders of one lock write the same row: B with token 34, then A,
// paused past its lease, with token 33. PostgreSQL refuses A's write.
func ExampleTable_Update() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (
		id      text PRIMARY KEY,
		balance bigint NOT NULL,
		fence   bigint NOT NULL DEFAULT 0)`); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO accounts (id, balance) VALUES ('acct-7', 100)"); err != nil {
		log.Fatal(err)
	}

	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
	if err != nil {
		log.Fatal(err)
	}
	err = accounts.Update(ctx, pool, "acct-7", 34, postgres.Set("balance", 120))
	fmt.Println("B, token 34:", err)

	err = accounts.Update(ctx, pool, "acct-7", 33, postgres.Set("balance", 90))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("A, token 33: refused, the row is at token %d\n", stale.Current)
	}

	var balance int64
	if err := pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 'acct-7'").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// B, token 34: <nil>
	// A, token 33: refused, the row is at token 34
	// balance: 120
}

// A fenced transaction touches two tables; the stale one is rolled back
// before its function runs.
func ExampleRunInTx() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if err := postgres.CreateSchema(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE invoices (id int PRIMARY KEY, paid_by text);
		CREATE TABLE audit (invoice int, holder text);
		INSERT INTO invoices VALUES (42, NULL)`); err != nil {
		log.Fatal(err)
	}

	pay := func(holder string, token fence.Token) error {
		return postgres.RunInTx(ctx, pool, "invoice-42", token, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "UPDATE invoices SET paid_by = $1 WHERE id = 42", holder); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO audit VALUES (42, $1)", holder)
			return err
		}, postgres.WithIsolation(pgx.ReadCommitted))
	}
	fmt.Println("B, token 34:", pay("B", 34))
	err := pay("A", 33)
	fmt.Println("A, token 33: stale:", errors.Is(err, fence.ErrStale))

	var paidBy string
	var audits int
	if err := pool.QueryRow(ctx, "SELECT paid_by, (SELECT count(*) FROM audit) FROM invoices").Scan(&paidBy, &audits); err != nil {
		log.Fatal(err)
	}
	fmt.Println("paid by:", paidBy, "audit rows:", audits)
	// Output:
	// B, token 34: <nil>
	// A, token 33: stale: true
	// paid by: B audit rows: 1
}

// The one-statement form: the guard and the write travel together.
func ExampleExec() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if err := postgres.CreateSchema(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE invoices (id int PRIMARY KEY, status text); INSERT INTO invoices VALUES (42, 'open')"); err != nil {
		log.Fatal(err)
	}

	n, err := postgres.Exec(ctx, pool, "invoice-42", 34, "UPDATE invoices SET status = $1 WHERE id = $2", "sent", 42)
	fmt.Println("token 34:", n, err)
	_, err = postgres.Exec(ctx, pool, "invoice-42", 33, "UPDATE invoices SET status = $1 WHERE id = $2", "void", 42)
	fmt.Println("token 33: stale:", errors.Is(err, fence.ErrStale))
	// Output:
	// token 34: 1 <nil>
	// token 33: stale: true
}
