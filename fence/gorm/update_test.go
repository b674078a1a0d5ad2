package gormfence_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestUpdate: a read-compute-write lands with the fence; a stale token is
// refused before fn runs; fn's error rolls everything back, the claim too.
func TestUpdate(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		ctx := t.Context()
		mustCreate(t, db, "u", 10)
		a := Account{ID: "u"}
		err := gormfence.Update(ctx, db, 4, &a, func(*gorm.DB) error { a.Balance += 5; return nil })
		if err != nil {
			t.Fatalf("Update(4): got error %v, want nil", err)
		}
		wantAccount(t, db, "u", 15, 4)
		boom := errors.New("boom")
		err = gormfence.Update(ctx, db, 6, &Account{ID: "u"}, func(*gorm.DB) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("Update with a failing fn: got %v, want %v", err, boom)
		}
		wantAccount(t, db, "u", 15, 4) // the claim was rolled back too
		called := false
		err = gormfence.Update(ctx, db, 3, &Account{ID: "u"}, func(*gorm.DB) error { called = true; return nil })
		fencewant.Stale(t, err, 3, 4)
		if called {
			t.Error("fn ran after a stale claim")
		}
		// Inside the caller's transaction, Update joins it.
		err = db.Transaction(func(tx *gorm.DB) error {
			b := Account{ID: "u"}
			return gormfence.Update(ctx, tx, 8, &b, func(*gorm.DB) error { b.Note = "in tx"; return nil })
		})
		if err != nil {
			t.Fatalf("Update in db.Transaction: got error %v, want nil", err)
		}
		wantAccount(t, db, "u", 15, 8)
	})
}

// TestUpdateConcurrent: writers with one token increment a counter at
// once, and none of their increments is lost; writers with tokens 1..n
// race, and only stale refusals fail them, the highest always landing.
func TestUpdateConcurrent(t *testing.T) {
	const n = 8
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		ctx := t.Context()
		mustCreate(t, db, "same", 0)
		mustCreate(t, db, "race", 0)
		errs := make(chan error, 2*n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				a := Account{ID: "same"}
				errs <- gormfence.Update(ctx, db, 3, &a, func(*gorm.DB) error { a.Balance++; return nil })
			})
			tok := fence.Token(i + 1)
			wg.Go(func() {
				a := Account{ID: "race"}
				err := gormfence.Update(ctx, db, tok, &a, func(*gorm.DB) error { a.Balance = int64(tok); return nil })
				if err != nil && !errors.Is(err, fence.ErrStale) {
					err = fmt.Errorf("token %d: %w", tok, err)
				} else {
					err = nil
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("got error %v, want nil (or ErrStale for a racing writer)", err)
			}
		}
		wantAccount(t, db, "same", n, 3)
		wantAccount(t, db, "race", n, n)
	})
}

// TestUpdateKeyChanged: fn that changes the model's primary key makes
// Update fail and write nothing; without the check, the fenced write went
// to the row the new key names, never claimed nor read, and overwrote it.
func TestUpdateKeyChanged(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		mustCreate(t, db, "mine", 10)
		mustCreate(t, db, "other", 77)
		a := Account{ID: "mine"}
		err := gormfence.Update(t.Context(), db, 4, &a, func(*gorm.DB) error { a.ID, a.Balance = "other", 1; return nil })
		if !errors.Is(err, gormfence.ErrInvalidArgument) {
			t.Fatalf("Update whose fn changed the key: got %v, want gormfence.ErrInvalidArgument", err)
		}
		wantAccount(t, db, "other", 77, 0)
		wantAccount(t, db, "mine", 10, 0) // the claim was rolled back too
	})
}
