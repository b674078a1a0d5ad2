package sqlfence_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// TestStoreUpdateValues: Update over a tombstone sees no value; an empty
// value and a nil result (stored empty) compare equal on the next Update
// (a conditional write that could not match an empty value would
// conflict forever); GetForUpdate of a tombstone claims it.
func TestStoreUpdateValues(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		ctx := t.Context()
		if err := s.Put(ctx, "k", 3, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "k", 4); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetForUpdate(ctx, "k", 5); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("GetForUpdate of a tombstone: got %v, want fence.ErrNotFound", err)
		}
		fencewant.Stale(t, s.Put(ctx, "k", 4, []byte("late")), 4, 5)
		var olds []fence.Record
		for _, v := range [][]byte{nil, {}, []byte("x")} {
			err := s.Update(ctx, "k", 5, func(old fence.Record) ([]byte, error) { olds = append(olds, old); return v, nil })
			if err != nil {
				t.Fatalf("Update to %q: got %v, want nil", v, err)
			}
		}
		want := `[{[] 0} {[] 5} {[] 5}]`
		if got := fmt.Sprint(olds); got != want || olds[0].Value != nil || olds[1].Value == nil {
			t.Fatalf("records Update read: got %s (first nil %v, second nil %v), want %s, the first with no value, the others empty", got, olds[0].Value == nil, olds[1].Value == nil, want)
		}
		if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "x" || r.Token != 5 {
			t.Fatalf("Get: got %q token %d, %v, want \"x\" token 5", r.Value, r.Token, err)
		}
	})
}

// TestStoreUpdateConflict: a writer with the same token that changes the
// record between every read and write makes Update give up with
// ErrConflict after fence.UpdateAttempts reads, and its own value is not
// written.
func TestStoreUpdateConflict(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		ctx := t.Context()
		calls := 0
		err := s.Update(ctx, "k", 3, func(fence.Record) ([]byte, error) {
			calls++
			if err := s.Put(ctx, "k", 3, fmt.Appendf(nil, "other %d", calls)); err != nil {
				return nil, err
			}
			return []byte("mine"), nil
		})
		if !errors.Is(err, fence.ErrConflict) || calls != fence.UpdateAttempts {
			t.Fatalf("Update against a writer between each read and write: got %v after %d calls, want fence.ErrConflict after %d", err, calls, fence.UpdateAttempts)
		}
		if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != fmt.Sprint("other ", calls) {
			t.Fatalf("Get: got %q, %v, want the other writer's last value", r.Value, err)
		}
	})
}

// TestStoreInTx: a Store on the caller's transaction claims and updates
// in it: a rollback takes the claim back.
func TestStoreInTx(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, s := newStore(t, srv)
		ctx := t.Context()
		if err := s.Put(ctx, "k", 3, []byte("1")); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		inTx, err := sqlfence.NewStore(tx, srv.d, sqlfence.Identifier{sqlfence.DefaultStoreTable})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := inTx.GetForUpdate(ctx, "k", 8); err != nil || string(r.Value) != "1" || r.Token != 8 {
			t.Fatalf("GetForUpdate in a transaction: got %q token %d, %v, want \"1\" token 8", r.Value, r.Token, err)
		}
		if err := inTx.Update(ctx, "k", 8, func(fence.Record) ([]byte, error) { return []byte("2"), nil }); err != nil {
			t.Fatalf("Update in a transaction: got %v, want nil", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "k", 4, []byte("after")); err != nil {
			t.Fatalf("Put(token 4) after the rollback: got %v, want nil (the claim rolled back)", err)
		}
	})
}

// TestStoreGetForUpdateConnectionLost: a claim waits on a row lock
// and its connection is reset: the server still runs it once the lock is
// free, so the outcome was unknown, and the floor is then the claim's.
func TestStoreGetForUpdateConnectionLost(t *testing.T) {
	direct, viaProxy, p := proxied(t)
	ctx := t.Context()
	s, err := sqlfence.NewStore(viaProxy, sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", 1, []byte("v")); err != nil {
		t.Fatal(err)
	}
	holder, err := direct.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	mustExec(t, holder, "SELECT * FROM fencelock_store WHERE `key` = 'k' FOR UPDATE")
	errc := make(chan error, 1)
	go func() { _, err := s.GetForUpdate(ctx, "k", 2); errc <- err }()
	waitStatement(t, direct, "INSERT")
	p.Reset()
	fencewant.Unknown(t, <-errc, 2, sqlfence.ErrRetryable)
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the lost claim to land", func() bool {
		var tok int64
		err := direct.QueryRowContext(ctx, "SELECT token FROM fencelock_store WHERE `key` = 'k'").Scan(&tok)
		return err == nil && tok == 2
	})
}

// TestRunInTxAllFunctionEndsTx: the unknown outcome of a RunInTxAll names
// every resource, and the first one's token.
func TestRunInTxAllFunctionEndsTx(t *testing.T) {
	srv := servers[2]
	db, f := newBank(t, srv)
	err := f.RunInTxAll(t.Context(), db, []fence.Claim{{Resource: "B", Token: 3}, {Resource: "A", Token: 5}}, func(tx *sql.Tx) error {
		return tx.Commit()
	})
	var ue *fence.UnknownOutcomeError
	if !errors.As(err, &ue) || ue.Resource != "A, B" || ue.Token != 5 {
		t.Fatalf("RunInTxAll whose function committed: got %v, want a *fence.UnknownOutcomeError for \"A, B\" token 5", err)
	}
}
