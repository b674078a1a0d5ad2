package gormfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	gormfence "github.com/fencelock/fencelock/fence/gorm"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// TestPreemptKeys: a waiting claim finds and ends an older holder of a
// row whose text key has quotes, backslashes, control characters or
// non-ASCII letters (on MariaDB, the key as InnoDB's lock_data shows it:
// a quote doubled, which sqlpreempt.Quoted once wrote as \' and then
// never found the holder; on PostgreSQL, the key as a parameter), within
// 2 s. The test kit's MariaDB tables are latin1: keys beyond it run on
// PostgreSQL alone.
func TestPreemptKeys(t *testing.T) {
	t.Parallel()
	keys := []struct {
		name, id string
		pgOnly   bool
	}{
		{"quote", "o'brien", false},
		{"backslash", `back\slash`, false},
		{"quote and backslash", `it\'s`, false},
		{"tab and newline", "a\tb\nc", false},
		{"accented", "café", false},
		{"cyrillic", "ключ", true},
		{"emoji", "key🔒", true},
	}
	eachPreempting(t, func(t *testing.T, srv preemptServer) {
		for _, k := range keys {
			if k.pgOnly && srv.dialect != "postgres" {
				continue
			}
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				db := openGorm(t, srv.open(srv.dsn(t)))
				mustCreate(t, db, k.id, 10)
				h := holdInUpdate(t, db, &Account{ID: k.id}, 2, false)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				start := time.Now()
				err := gormfence.Update(ctx, db, 3, &Account{ID: k.id}, func(*gorm.DB) error { return nil })
				if took := time.Since(start); err != nil || took > 2*time.Second {
					t.Fatalf("waiter on %q: got %v after %v, want nil well within 2 s", k.id, err, took)
				}
				if err := h.result(); !errors.Is(err, sqlfence.ErrTerminated) {
					t.Fatalf("holder, once it went on: got %v, want sqlfence.ErrTerminated", err)
				}
			})
		}
	})
}
