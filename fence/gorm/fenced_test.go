package gormfence_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// fencedUpdate sets id's balance with token through the Fenced scope.
func fencedUpdate(db *gorm.DB, id string, token fence.Token, balance int64) error {
	return db.Scopes(gormfence.Fenced(token)).Model(&Account{ID: id}).Update("balance", balance).Error
}

// TestFencedUpdate: a fenced update lands at or above the row's fence and
// is refused, changing nothing, below it; a missing row is not stale.
func TestFencedUpdate(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		mustCreate(t, db, "a", 0)
		a := Account{ID: "a"}
		if err := db.Scopes(gormfence.Fenced(5)).Model(&a).Updates(map[string]any{"balance": 10, "note": "five"}).Error; err != nil {
			t.Fatalf("Fenced(5): got error %v, want nil", err)
		}
		if a.Fence != 5 {
			t.Errorf("model's Fence after the update: got %d, want 5", a.Fence)
		}
		wantAccount(t, db, "a", 10, 5)
		fencewant.Stale(t, fencedUpdate(db, "a", 3, 99), 3, 5)
		wantAccount(t, db, "a", 10, 5)
		// The same values again with the same token: MySQL counts no row
		// changed, and it is still a landed write.
		if err := fencedUpdate(db, "a", 5, 10); err != nil {
			t.Fatalf("the same write again: got error %v, want nil", err)
		}
		if err := fencedUpdate(db, "a", 7, 20); err != nil {
			t.Fatalf("Fenced(7): got error %v, want nil", err)
		}
		wantAccount(t, db, "a", 20, 7)
		err := fencedUpdate(db, "missing", 9, 1)
		if !errors.Is(err, gormfence.ErrRowNotFound) || !errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("update of a missing row: got %v, want ErrRowNotFound (and gorm.ErrRecordNotFound), not ErrStale", err)
		}
	})
}

// TestFencedStruct: Updates of the model itself (Select("*"), and Save)
// are fenced too, whatever its Fence field says.
func TestFencedStruct(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		mustCreate(t, db, "s", 0)
		a := Account{ID: "s", Balance: 30, Note: "x", Fence: 1}
		if err := db.Scopes(gormfence.Fenced(4)).Select("*").Updates(&a).Error; err != nil {
			t.Fatalf("Select(*).Updates: got error %v, want nil", err)
		}
		wantAccount(t, db, "s", 30, 4)
		a.Balance = 40
		if err := db.Scopes(gormfence.Fenced(6)).Save(&a).Error; err != nil {
			t.Fatalf("Save: got error %v, want nil", err)
		}
		wantAccount(t, db, "s", 40, 6)
		// Save of the same values with the same token: MySQL counts no row
		// changed, and Save must not take that for a missing row and insert.
		if err := db.Scopes(gormfence.Fenced(6)).Save(&a).Error; err != nil {
			t.Fatalf("Save of the same values: got error %v, want nil", err)
		}
		old := Account{ID: "s", Balance: 1}
		fencewant.Stale(t, db.Scopes(gormfence.Fenced(2)).Save(&old).Error, 2, 6)
		wantAccount(t, db, "s", 40, 6)
	})
}

// TestFencingControl is the control of TestFencedUpdate: the same late
// write of an older holder, unfenced, lands over the newer holder's.
func TestFencingControl(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		name := map[bool]string{true: "fenced", false: "unfenced (control)"}[fenced]
		t.Run(name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, db *gorm.DB) {
				mustCreate(t, db, "c", 0)
				write := func(tok fence.Token, balance int64) error {
					if fenced {
						return fencedUpdate(db, "c", tok, balance)
					}
					return db.Model(&Account{ID: "c"}).Updates(map[string]any{"balance": balance, "fence": int64(tok)}).Error
				}
				if err := write(2, 200); err != nil { // the newer holder
					t.Fatal(err)
				}
				err := write(1, 100) // the older holder's write, arriving late
				if fenced {
					fencewant.Stale(t, err, 1, 2)
					wantAccount(t, db, "c", 200, 2)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				wantAccount(t, db, "c", 100, 1) // the newer write is lost
			})
		})
	}
}

// TestFencedBusyRetryable: on SQLite with no busy_timeout, a fenced update
// that finds another connection's write lock fails at once, and the error
// is classified as fence/sql classifies its own: ErrRetryable, nothing
// written, never an unknown outcome.
func TestFencedBusyRetryable(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "busy.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(0)"
	db := openGorm(t, sqlite.Open(dsn))
	mustCreate(t, db, "b", 0)
	holder := db.Begin()
	if err := holder.Exec("UPDATE accounts SET note = 'held' WHERE id = 'b'").Error; err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	err := fencedUpdate(db.Session(&gorm.Session{SkipDefaultTransaction: true}), "b", 3, 30)
	if !errors.Is(err, sqlfence.ErrRetryable) || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("got %v, want an error matching sqlfence.ErrRetryable, not fence.ErrUnknownOutcome", err)
	}
	holder.Rollback()
	wantAccount(t, db, "b", 0, 0)
}
