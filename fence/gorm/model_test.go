package gormfence_test

import (
	"testing"

	"gorm.io/gorm"

	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// PtrFence has a fence field of a pointer type.
type PtrFence struct {
	ID      string `gorm:"primaryKey;size:64"`
	Balance int64
	Fence   *int64 `gorm:"not null;default:0"`
}

// UintFence has a fence field of an unsigned type, by its tag.
type UintFence struct {
	ID      string `gorm:"primaryKey;size:64"`
	Balance int64
	Holder  uint `gorm:"not null;default:0;fence"`
}

// TestFenceFieldKinds: a fence field of a pointer or unsigned type works
// in Update (whose claim reads the fence back from the model in MySQL)
// and refuses a stale Fenced update. A *int64 fence panicked in the
// claim's read back in MySQL.
func TestFenceFieldKinds(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		if err := db.AutoMigrate(&PtrFence{}, &UintFence{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Create(&PtrFence{ID: "p"}).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Create(&UintFence{ID: "u"}).Error; err != nil {
			t.Fatal(err)
		}
		p := PtrFence{ID: "p"}
		if err := gormfence.Update(t.Context(), db, 5, &p, func(*gorm.DB) error { p.Balance = 5; return nil }); err != nil {
			t.Fatalf("Update of a *int64 fence: got error %v, want nil", err)
		}
		if p.Fence == nil || *p.Fence != 5 {
			t.Errorf("model's Fence after Update: got %v, want 5", p.Fence)
		}
		fencewant.Stale(t, db.Scopes(gormfence.Fenced(4)).Model(&PtrFence{ID: "p"}).Update("balance", 4).Error, 4, 5)
		u := UintFence{ID: "u"}
		if err := gormfence.Update(t.Context(), db, 5, &u, func(*gorm.DB) error { u.Balance = 5; return nil }); err != nil {
			t.Fatalf("Update of a uint fence: got error %v, want nil", err)
		}
		fencewant.Stale(t, db.Scopes(gormfence.Fenced(4)).Model(&UintFence{ID: "u"}).Update("balance", 4).Error, 4, 5)
	})
}
