package gormfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
)

// Shipment is a model with a fence column: the field named Fence (or any
// integer field tagged gorm:"fence").
type Shipment struct {
	ID     string `gorm:"primaryKey;size:64"`
	Status string `gorm:"size:32"`
	Fence  int64  `gorm:"not null;default:0"`
}

// exampleDB opens a fresh SQLite database with the plugin registered, and
// returns a function that closes and removes it.
func exampleDB() (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "gormfence-example-")
	if err != nil {
		log.Fatal(err)
	}
	dsn := "file:" + filepath.Join(dir, "app.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Use(gormfence.Plugin{}); err != nil {
		log.Fatal(err)
	}
	if err := db.AutoMigrate(&Shipment{}); err != nil {
		log.Fatal(err)
	}
	return db, func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		_ = os.RemoveAll(dir)
	}
}

// Example: a holder with token 7 updates a shipment; an older holder's
// late update (token 5) is refused and changes nothing.
func Example() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	db.Create(&Shipment{ID: "s-1", Status: "packed"})

	err := db.WithContext(ctx).Scopes(gormfence.Fenced(7)).
		Model(&Shipment{ID: "s-1"}).Update("status", "shipped").Error
	fmt.Println("token 7:", err)

	err = db.WithContext(ctx).Scopes(gormfence.Fenced(5)).
		Model(&Shipment{ID: "s-1"}).Update("status", "cancelled").Error
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println("token 5: stale, the row is at", stale.Current)
	}

	var s Shipment
	db.Take(&s, "id = ?", "s-1")
	fmt.Println(s.Status, s.Fence)
	// Output:
	// token 7: <nil>
	// token 5: stale, the row is at 7
	// shipped 7
}

// ExampleUpdate: a read-compute-write in a transaction. The claim raises
// the row's fence to the token before the read, so an older holder's late
// write cannot land between the read and the write.
func ExampleUpdate() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	db.Create(&Shipment{ID: "s-2", Status: "packed"})

	s := Shipment{ID: "s-2"}
	err := gormfence.Update(ctx, db, 9, &s, func(tx *gorm.DB) error {
		if s.Status == "packed" {
			s.Status = "shipped"
		}
		return nil
	})
	fmt.Println(err, s.Status, s.Fence)

	err = gormfence.Update(ctx, db, 8, &Shipment{ID: "s-2"}, func(*gorm.DB) error { return nil })
	fmt.Println(errors.Is(err, fence.ErrStale))
	// Output:
	// <nil> shipped 9
	// true
}

// ExampleClaim: the first touch of a row claims it; a missing row is not
// stale.
func ExampleClaim() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()

	err := gormfence.Claim(ctx, db, 3, &Shipment{ID: "nope"})
	fmt.Println(errors.Is(err, gormfence.ErrRowNotFound), errors.Is(err, fence.ErrStale))
	// Output:
	// true false
}

// Wallet is a model whose fence column is named by the gorm:"fence" tag.
type Wallet struct {
	ID      string `gorm:"primaryKey;size:64"`
	Balance int64
	Holder  int64 `gorm:"not null;default:0;fence"`
}

// errInsufficientFunds is withdraw's refusal.
var errInsufficientFunds = errors.New("insufficient funds")

// withdraw takes amount from a wallet under the holder's token: the claim
// refuses a stale holder before the read, and holds the row until the
// fenced write commits. docs/gorm.md shows this function as it is here.
func withdraw(ctx context.Context, db *gorm.DB, token fence.Token, id string, amount int64) error {
	w := Wallet{ID: id}
	err := gormfence.Update(ctx, db, token, &w, func(tx *gorm.DB) error {
		if w.Balance < amount {
			return errInsufficientFunds
		}
		w.Balance -= amount
		return nil
	})
	switch {
	case errors.Is(err, fence.ErrStale):
		return fmt.Errorf("a newer holder has the wallet: %w", err)
	case errors.Is(err, fence.ErrUnknownOutcome):
		return fmt.Errorf("read the wallet back before deciding: %w", err)
	}
	return err
}

// Example_withdraw: two withdrawals by the holder with token 4, then one
// by an older holder (token 3), refused before it reads.
func Example_withdraw() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	if err := db.AutoMigrate(&Wallet{}); err != nil {
		log.Fatal(err)
	}
	db.Create(&Wallet{ID: "w-1", Balance: 100})

	fmt.Println(withdraw(ctx, db, 4, "w-1", 30))
	fmt.Println(withdraw(ctx, db, 4, "w-1", 80))
	fmt.Println(withdraw(ctx, db, 3, "w-1", 10))
	var w Wallet
	db.Take(&w, "id = ?", "w-1")
	fmt.Println(w.Balance, w.Holder)
	// Output:
	// <nil>
	// insufficient funds
	// a newer holder has the wallet: fence: stale token 3 for "wallets/w-1": the resource has accepted 4
	// 70 4
}
