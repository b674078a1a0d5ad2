package gormfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	gormfence "github.com/fencelock/fencelock/fence/gorm"
)

// TestPreemptLeavesOtherResourcesHolder: a fenced transaction that
// claimed row "a" (with token 2, of a's lock, which it still holds) and,
// in the same transaction, wrote row "b" without claiming it, holds b's
// row lock without ever having been b's holder. A claim of "b" with token
// 3 (of b's lock) waits for it and must leave it alone: the waiter's
// context ends after 700 ms, its error naming what blocked it, and the
// holder commits. The control is the holder of "b" itself with token 2,
// which the same waiter ends (TestPreemptHolders, "older, text key").
func TestPreemptLeavesOtherResourcesHolder(t *testing.T) {
	t.Parallel()
	eachPreempting(t, func(t *testing.T, srv preemptServer) {
		db := openGorm(t, srv.open(srv.dsn(t)))
		mustCreate(t, db, "a", 10)
		mustCreate(t, db, "b", 10)
		if err := gormfence.Claim(t.Context(), db, 1, &Account{ID: "b"}); err != nil {
			t.Fatal(err)
		}
		inside := make(chan struct{})
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- gormfence.Update(context.WithoutCancel(t.Context()), db, 2, &Account{ID: "a"}, func(tx *gorm.DB) error {
				// An unfenced write of another row, in a's fenced transaction.
				if err := tx.Model(&Account{ID: "b"}).Update("note", "touched by a's holder").Error; err != nil {
					return err
				}
				close(inside)
				<-release
				return nil
			})
		}()
		select {
		case <-inside:
		case err := <-done:
			t.Fatalf("holder of a: got %v before it held b's row, want it inside", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
		defer cancel()
		err := gormfence.Update(ctx, db, 3, &Account{ID: "b"}, func(*gorm.DB) error { return nil })
		close(release)
		herr := <-done
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "blocked by") {
			t.Errorf("waiter on b: got %v, want the deadline, naming what blocked it", err)
		}
		if herr != nil {
			t.Fatalf("holder of a (token 2, never b's holder): got %v, want its commit (left alone)", herr)
		}
	})
}
