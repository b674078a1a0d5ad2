package gormfence_test

import (
	"testing"

	"gorm.io/gorm"

	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestFencedWhereOr: the fence predicate binds to all of an update's
// conditions, not to the last of them: with Where(a).Or(b), or a raw
// condition whose OR gorm does not see (a newline before it), a stale
// write is refused and changes nothing. Without the parentheses the
// statement reads a OR (b AND fence <= token), and a row matching a takes
// the stale write whatever its fence.
func TestFencedWhereOr(t *testing.T) {
	forms := []struct {
		name  string
		where func(db *gorm.DB) *gorm.DB
	}{
		{"Where.Or", func(db *gorm.DB) *gorm.DB { return db.Where("id = ?", "a").Or("id = ?", "b") }},
		{"raw OR after a newline", func(db *gorm.DB) *gorm.DB { return db.Where("id = ?\nOR id = ?", "a", "b") }},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, db *gorm.DB) {
				mustCreate(t, db, "a", 0)
				mustCreate(t, db, "b", 0)
				for _, id := range []string{"a", "b"} {
					if err := fencedUpdate(db, id, 5, 50); err != nil {
						t.Fatalf("Fenced(5) on %q: got error %v, want nil", id, err)
					}
				}
				err := f.where(db.Scopes(gormfence.Fenced(3)).Model(&Account{})).Update("balance", 30).Error
				fencewant.Stale(t, err, 3, 5)
				wantAccount(t, db, "a", 50, 5)
				wantAccount(t, db, "b", 50, 5)
			})
		})
	}
}

// TestFencedWhereSeveralRows: a fenced update whose Where matches two
// rows, one of them at a higher fence, changes neither and is stale
// (GORM's default transaction rolls back the row it did change). Without
// the check it landed on the lower row and returned nil, the refused row
// untold.
func TestFencedWhereSeveralRows(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		mustCreate(t, db, "hi", 0)
		mustCreate(t, db, "lo", 0)
		if err := fencedUpdate(db, "hi", 9, 0); err != nil {
			t.Fatal(err)
		}
		err := db.Scopes(gormfence.Fenced(5)).Model(&Account{}).Where("id IN ?", []string{"hi", "lo"}).Update("balance", 5).Error
		fencewant.Stale(t, err, 5, 9)
		wantAccount(t, db, "lo", 0, 0)
		wantAccount(t, db, "hi", 0, 9)
	})
}
