package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// exampleSQLite opens a fresh SQLite database file, and returns a function
// that closes and removes it.
func exampleSQLite() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "sqlfence-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { _ = db.Close(); _ = os.RemoveAll(dir) }
}

// openStore opens the database at dsn with the database/sql driver named
// driver (registered by importing its package) and returns a Store in it,
// its table created unless it exists. docs/sql.md shows this function as
// it is here.
func openStore(ctx context.Context, driver, dsn string, dialect sqlfence.Dialect) (*sql.DB, *sqlfence.Store, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, nil, err
	}
	store, err := sqlfence.NewStore(db, dialect, sqlfence.Identifier{sqlfence.DefaultStoreTable})
	if err == nil {
		err = store.CreateTable(ctx)
	}
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, store, nil
}

// Two holders of one lock write the same row: B with token 34, then A,
// paused past its lease, with token 33. The database refuses A's write.
func ExampleTable_Update() {
	ctx := context.Background()
	db, done := exampleSQLite()
	defer done()
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (
		id      TEXT PRIMARY KEY,
		balance BIGINT NOT NULL,
		fence   BIGINT NOT NULL DEFAULT 0)`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO accounts (id, balance) VALUES ('acct-7', 100)"); err != nil {
		log.Fatal(err)
	}

	accounts, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
	if err != nil {
		log.Fatal(err)
	}
	err = accounts.Update(ctx, db, "acct-7", 34, sqlfence.Set("balance", 120))
	fmt.Println("B, token 34:", err)

	err = accounts.Update(ctx, db, "acct-7", 33, sqlfence.Set("balance", 90))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("A, token 33: refused, the row is at %d\n", stale.Current)
	}

	var balance int
	if err := db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 'acct-7'").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// B, token 34: <nil>
	// A, token 33: refused, the row is at 34
	// balance: 120
}

// A fenced transaction raises the resource's fence first: a stale one is
// rolled back before its function runs.
func ExampleFences_RunInTx() {
	ctx := context.Background()
	db, done := exampleSQLite()
	defer done()
	if err := sqlfence.CreateSchema(ctx, db, sqlfence.SQLite); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE invoices (id INTEGER PRIMARY KEY, paid BOOLEAN NOT NULL DEFAULT false)"); err != nil {
		log.Fatal(err)
	}
	fences, err := sqlfence.NewFences(sqlfence.SQLite, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		log.Fatal(err)
	}
	pay := func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO invoices (id, paid) VALUES (42, true) ON CONFLICT (id) DO UPDATE SET paid = true")
		return err
	}
	fmt.Println("token 8:", fences.RunInTx(ctx, db, "invoice-42", 8, pay))
	err = fences.RunInTx(ctx, db, "invoice-42", 7, pay)
	fmt.Println("token 7 stale:", errors.Is(err, fence.ErrStale))
	// Output:
	// token 8: <nil>
	// token 7 stale: true
}

// The Store is a fence.Store, like fence/postgres's and fence/s3's: one
// fenced upsert per Put.
func ExampleStore() {
	ctx := context.Background()
	db, done := exampleSQLite()
	defer done()
	s, err := sqlfence.NewStore(db, sqlfence.SQLite, sqlfence.Identifier{sqlfence.DefaultStoreTable})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Put(ctx, "config", 5, []byte("v5")))
	fmt.Println(errors.Is(s.Put(ctx, "config", 4, []byte("v4")), fence.ErrStale))
	r, err := s.Get(ctx, "config")
	fmt.Println(string(r.Value), r.Token, err)
	// Output:
	// <nil>
	// true
	// v5 5 <nil>
}

// A counter in the Store: Update reads the record and writes the new one
// only if nothing came between; a late write of an older holder is
// refused.
func ExampleStore_Update() {
	ctx := context.Background()
	db, done := exampleSQLite()
	defer done()
	if err := sqlfence.CreateSchema(ctx, db, sqlfence.SQLite); err != nil {
		log.Fatal(err)
	}
	s, err := sqlfence.NewStore(db, sqlfence.SQLite, sqlfence.Identifier{sqlfence.DefaultStoreTable})
	if err != nil {
		log.Fatal(err)
	}
	increment := func(old fence.Record) ([]byte, error) {
		n := 0
		if old.Value != nil {
			var err error
			if n, err = strconv.Atoi(string(old.Value)); err != nil {
				return nil, err
			}
		}
		return strconv.AppendInt(nil, int64(n+1), 10), nil
	}
	for range 3 {
		if err := s.Update(ctx, "hits", 7, increment); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("late write of token 6 stale:", errors.Is(s.Put(ctx, "hits", 6, []byte("0")), fence.ErrStale))
	r, err := s.Get(ctx, "hits")
	fmt.Println(string(r.Value), r.Token, err)
	// Output:
	// late write of token 6 stale: true
	// 3 7 <nil>
}

// A transfer between two rows of your own table, each account with its
// own lock and token: read each row with GetForUpdate (in key order,
// so that transfers in opposite directions wait rather than deadlock),
// then write what was computed. An older holder's write that arrives
// after the read is refused.
func ExampleTable_GetForUpdate() {
	ctx := context.Background()
	db, done := exampleSQLite()
	defer done()
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (
		id      TEXT PRIMARY KEY,
		balance BIGINT NOT NULL,
		fence   BIGINT NOT NULL DEFAULT 0)`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000), ('acct-B', 1000)"); err != nil {
		log.Fatal(err)
	}
	accounts, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
	if err != nil {
		log.Fatal(err)
	}
	transfer := func(tokA, tokB fence.Token, amount int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var a, b int64
		if err := accounts.GetForUpdate(ctx, tx, "acct-A", tokA, []string{"balance"}, &a); err != nil {
			return err
		}
		if err := accounts.GetForUpdate(ctx, tx, "acct-B", tokB, []string{"balance"}, &b); err != nil {
			return err
		}
		if err := accounts.Update(ctx, tx, "acct-A", tokA, sqlfence.Set("balance", a-amount)); err != nil {
			return err
		}
		if err := accounts.Update(ctx, tx, "acct-B", tokB, sqlfence.Set("balance", b+amount)); err != nil {
			return err
		}
		return tx.Commit()
	}
	fmt.Println("transfer, tokens 4 and 6:", transfer(4, 6, 10))
	err = accounts.Update(ctx, db, "acct-B", 3, sqlfence.Add("balance", 100))
	fmt.Println("older holder's late write stale:", errors.Is(err, fence.ErrStale))
	var a, b int64
	if err := db.QueryRowContext(ctx, "SELECT (SELECT balance FROM accounts WHERE id = 'acct-A'), (SELECT balance FROM accounts WHERE id = 'acct-B')").Scan(&a, &b); err != nil {
		log.Fatal(err)
	}
	fmt.Println(a, b)
	// Output:
	// transfer, tokens 4 and 6: <nil>
	// older holder's late write stale: true
	// 990 1010
}

// The same transfer through the fence table: RunInTxAll raises both
// accounts' fences, in name order, before the function runs (a
// *etcdlock.MultiLock goes to RunInTxHeld instead of a list), and the
// function's reads and writes are plain SQL.
func ExampleFences_RunInTxAll() {
	ctx := context.Background()
	db, done := exampleSQLite()
	defer done()
	if err := sqlfence.CreateSchema(ctx, db, sqlfence.SQLite); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO accounts VALUES ('acct-A', 1000), ('acct-B', 1000)"); err != nil {
		log.Fatal(err)
	}
	fences, err := sqlfence.NewFences(sqlfence.SQLite, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		log.Fatal(err)
	}
	transfer := func(from, to string, tokFrom, tokTo fence.Token, amount int) error {
		claims := []fence.Claim{{Resource: from, Token: tokFrom}, {Resource: to, Token: tokTo}}
		return fences.RunInTxAll(ctx, db, claims, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", amount, from); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", amount, to)
			return err
		})
	}
	fmt.Println("A to B, tokens 4 and 6:", transfer("acct-A", "acct-B", 4, 6, 100))
	fmt.Println("B to A, tokens 6 and 4:", transfer("acct-B", "acct-A", 6, 4, 30))
	err = transfer("acct-A", "acct-B", 3, 6, 500)
	fmt.Println("older holder of A stale:", errors.Is(err, fence.ErrStale))
	var a int64
	if err := db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 'acct-A'").Scan(&a); err != nil {
		log.Fatal(err)
	}
	fmt.Println("A:", a)
	// Output:
	// A to B, tokens 4 and 6: <nil>
	// B to A, tokens 6 and 4: <nil>
	// older holder of A stale: true
	// A: 930
}
