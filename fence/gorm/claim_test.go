package gormfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestClaim: a claim raises the fence and reads the row; a lower token's
// claim or write is then stale, a missing row is not.
func TestClaim(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		ctx := t.Context()
		mustCreate(t, db, "a", 70)
		a := Account{ID: "a"}
		if err := gormfence.Claim(ctx, db, 5, &a); err != nil {
			t.Fatalf("Claim(5): got error %v, want nil", err)
		}
		if a.Balance != 70 || a.Fence != 5 {
			t.Fatalf("Claim(5) read: got balance %d fence %d, want 70 and 5", a.Balance, a.Fence)
		}
		if err := gormfence.Claim(ctx, db, 5, &Account{ID: "a"}); err != nil {
			t.Fatalf("Claim(5) again: got error %v, want nil", err)
		}
		fencewant.Stale(t, fencedUpdate(db, "a", 4, 1), 4, 5)
		fencewant.Stale(t, gormfence.Claim(ctx, db, 3, &Account{ID: "a"}), 3, 5)
		wantAccount(t, db, "a", 70, 5)
		err := gormfence.Claim(ctx, db, 9, &Account{ID: "missing"})
		if !errors.Is(err, gormfence.ErrRowNotFound) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("Claim of a missing row: got %v, want ErrRowNotFound, not ErrStale", err)
		}
	})
}

// TestClaimKeepsReadFenced is the lost update a claim prevents. Holder 2
// reads the row, then holder 1's late write arrives, then holder 2 writes
// what it computed from its read. Read with Claim, the late write is
// refused; the control reads plainly, and both writes are acknowledged
// while the late one is lost.
func TestClaimKeepsReadFenced(t *testing.T) {
	for _, claim := range []bool{true, false} {
		name := map[bool]string{true: "claim", false: "plain read (control)"}[claim]
		t.Run(name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, db *gorm.DB) {
				mustCreate(t, db, "r", 100)
				b := Account{ID: "r"}
				var err error
				if claim {
					err = gormfence.Claim(t.Context(), db, 2, &b)
				} else {
					err = db.Take(&b).Error
				}
				if err != nil {
					t.Fatal(err)
				}
				late := fencedUpdate(db, "r", 1, 150) // holder 1's +50, computed before
				if err := fencedUpdate(db, "r", 2, b.Balance+10); err != nil {
					t.Fatalf("holder 2's write: got error %v, want nil", err)
				}
				if claim {
					fencewant.Stale(t, late, 1, 2)
					wantAccount(t, db, "r", 110, 2)
					return
				}
				if late != nil {
					t.Fatalf("control: the late write got %v, want it acknowledged", late)
				}
				wantAccount(t, db, "r", 110, 2) // holder 1's acknowledged +50 is lost
			})
		})
	}
}

// counter is a gorm logger that counts the statements sent.
type counter struct {
	logger.Interface
	n atomic.Int64
}

func (c *counter) Trace(context.Context, time.Time, func() (string, int64), error) { c.n.Add(1) }

// TestClaimStatements: a claim is one statement where the dialect returns
// the updated row (PostgreSQL, SQLite: UPDATE ... RETURNING), two in
// MariaDB (the UPDATE, then SELECT ... FOR UPDATE).
func TestClaimStatements(t *testing.T) {
	want := map[string]int64{"MariaDB": 2, "PostgreSQL": 1, "SQLite": 1}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			db := srv.open(t)
			mustCreate(t, db, "a", 70)
			c := &counter{Interface: logger.Discard}
			a := Account{ID: "a"}
			if err := gormfence.Claim(t.Context(), db.Session(&gorm.Session{Logger: c}), 5, &a); err != nil {
				t.Fatalf("Claim: got error %v, want nil", err)
			}
			if a.Balance != 70 || a.Fence != 5 {
				t.Fatalf("Claim read: got balance %d fence %d, want 70 and 5", a.Balance, a.Fence)
			}
			if got := c.n.Load(); got != want[srv.name] {
				t.Errorf("statements: got %d, want %d", got, want[srv.name])
			}
		})
	}
}
