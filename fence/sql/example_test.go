package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

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
