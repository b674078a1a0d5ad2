package gormfence_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// Item is a model keyed by an integer: InnoDB's lock_data shows its key
// in decimal, where Account's is quoted text.
type Item struct {
	ID    uint `gorm:"primaryKey"`
	Qty   int64
	Fence int64 `gorm:"not null;default:0"`
}

// holding is an Update (or a plain transaction) of another goroutine,
// stopped inside with its row locked until release closes.
type holding struct {
	release chan struct{}
	done    chan error
}

// holdInUpdate runs, in another goroutine, Update of model with token
// (or, plain, a transaction that locks model's row with SELECT ... FOR
// UPDATE and raises nothing), and returns once its row is locked.
func holdInUpdate(t *testing.T, db *gorm.DB, model any, token fence.Token, plain bool) *holding {
	t.Helper()
	h := &holding{release: make(chan struct{}), done: make(chan error, 1)}
	inside := make(chan struct{})
	fn := func(*gorm.DB) error {
		close(inside)
		<-h.release
		return nil
	}
	go func() {
		ctx := context.WithoutCancel(t.Context())
		if plain {
			h.done <- db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(model).Error; err != nil {
					return err
				}
				return fn(tx)
			})
			return
		}
		h.done <- gormfence.Update(ctx, db, token, model, fn)
	}()
	select {
	case <-inside:
	case err := <-h.done:
		t.Fatalf("holder: got %v before it held its row, want it inside", err)
	}
	t.Cleanup(h.let)
	return h
}

func (h *holding) let() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *holding) result() error {
	h.let()
	err := <-h.done
	h.done <- err
	return err
}

// TestPreemptHolders: which holders of a row (claimed with token 1
// before) a waiting claim ends. An older token's Update is ended, on a
// model keyed by an integer too (the holder gets sqlfence.ErrTerminated);
// the same token's (the same holder's own transaction) and a transaction
// that raised no fence (a plain SELECT ... FOR UPDATE) are left alone: the
// waiter's context ends after 700 ms, its error naming what blocked it,
// and the holder commits. An older holder whose claim found the row at
// its own token already (its second Update with that token) raised
// nothing: PostgreSQL tells it by its tag and ends it; MariaDB tells a
// holder by the fence it raised, and leaves it alone as it leaves a
// transaction that is not fenced (the limit docs/gorm.md states).
func TestPreemptHolders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		model    func() any
		holder   fence.Token
		plain    bool
		waiter   fence.Token
		wantEnds bool
		// raisedNothing: the holder's claim found the row at its own
		// token already, and raised nothing; on MariaDB, which tells a
		// holder by the fence it raised, it is then left alone.
		raisedNothing bool
	}{
		{"older, text key", func() any { return &Account{ID: "h"} }, 2, false, 3, true, false},
		{"older, integer key", func() any { return &Item{ID: 7} }, 2, false, 3, true, false},
		{"older, the row at its token already", func() any { return &Account{ID: "h"} }, 1, false, 3, true, true},
		{"same token", func() any { return &Account{ID: "h"} }, 4, false, 4, false, false},
		{"not fenced", func() any { return &Account{ID: "h"} }, 0, true, 30, false, false},
	}
	eachPreempting(t, func(t *testing.T, srv preemptServer) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				db := openGorm(t, srv.open(srv.dsn(t)))
				if err := db.AutoMigrate(&Item{}); err != nil {
					t.Fatal(err)
				}
				mustCreate(t, db, "h", 1000)
				if err := db.Create(&Item{ID: 7, Qty: 5}).Error; err != nil {
					t.Fatal(err)
				}
				if err := gormfence.Claim(t.Context(), db, 1, tt.model()); err != nil {
					t.Fatal(err)
				}
				h := holdInUpdate(t, db, tt.model(), tt.holder, tt.plain)
				wantEnds := tt.wantEnds && !(tt.raisedNothing && srv.dialect == "mysql")
				limit := 700 * time.Millisecond
				if wantEnds {
					limit = 10 * time.Second
				}
				ctx, cancel := context.WithTimeout(t.Context(), limit)
				defer cancel()
				start := time.Now()
				err := gormfence.Update(ctx, db, tt.waiter, tt.model(), func(*gorm.DB) error { return nil })
				took := time.Since(start)
				if !wantEnds {
					if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "blocked by") {
						t.Errorf("waiter: got %v, want the deadline, naming what blocked it", err)
					}
					if err := h.result(); err != nil {
						t.Fatalf("holder: got %v, want its commit (left alone)", err)
					}
					return
				}
				if err != nil || took > 2*time.Second {
					t.Fatalf("waiter: got %v after %v, want nil well within 2 s", err, took)
				}
				if err := h.result(); !errors.Is(err, sqlfence.ErrTerminated) {
					t.Fatalf("holder, once it went on: got %v, want sqlfence.ErrTerminated", err)
				}
			})
		}
	})
}

// TestPreemptTagIsTransactions: on PostgreSQL a claim tags its
// transaction (application_name, internal/pgtag) for the transaction
// alone: inside Update the session shows the claim's token, and once it
// commits, or after a Claim outside a transaction, the pool's one
// connection shows its own name again, for whoever uses it next.
func TestPreemptTagIsTransactions(t *testing.T) {
	db := openPostgres(t)
	pool(t, db).SetMaxOpenConns(1)
	mustCreate(t, db, "g", 10)
	appName := func(db *gorm.DB) string {
		t.Helper()
		var name string
		if err := db.Raw("SHOW application_name").Scan(&name).Error; err != nil {
			t.Fatal(err)
		}
		return name
	}
	before := appName(db)
	if strings.HasPrefix(before, "fencelock:") {
		t.Fatalf("application_name before any claim: got %q, want no tag", before)
	}
	var inside string
	err := gormfence.Update(t.Context(), db, 3, &Account{ID: "g"}, func(tx *gorm.DB) error {
		inside = appName(tx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inside, "fencelock:t=3-3;") {
		t.Errorf("application_name inside Update: got %q, want the tag of token 3", inside)
	}
	if got := appName(db); got != before {
		t.Errorf("application_name after Update: got %q, want %q", got, before)
	}
	if err := gormfence.Claim(t.Context(), db, 4, &Account{ID: "g"}); err != nil {
		t.Fatal(err)
	}
	if got := appName(db); got != before {
		t.Errorf("application_name after Claim: got %q, want %q", got, before)
	}
}

// TestPluginPreemptOptions: Initialize refuses a negative PreemptAfter,
// and one set with NoPreemption, before anything is registered.
func TestPluginPreemptOptions(t *testing.T) {
	tests := []struct {
		name    string
		plugin  gormfence.Plugin
		wantErr bool
	}{
		{"default", gormfence.Plugin{}, false},
		{"PreemptAfter", gormfence.Plugin{PreemptAfter: 50 * time.Millisecond}, false},
		{"NoPreemption", gormfence.Plugin{NoPreemption: true}, false},
		{"negative", gormfence.Plugin{PreemptAfter: -time.Millisecond}, true},
		{"both", gormfence.Plugin{PreemptAfter: time.Second, NoPreemption: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := gorm.Open(sqlite.Open(filepath.Join(t.TempDir(), "o.db")), &gorm.Config{Logger: logger.Discard})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pool(t, db).Close() })
			err = db.Use(tt.plugin)
			if got := errors.Is(err, gormfence.ErrInvalidArgument); got != tt.wantErr {
				t.Fatalf("Use(%+v): got %v, want ErrInvalidArgument %v", tt.plugin, err, tt.wantErr)
			}
		})
	}
}
