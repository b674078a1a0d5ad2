package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestStoreUpdateConflict: a write with the same token between every read
// and write (the holder's own) makes Update read again, UpdateAttempts
// times in all, then fail with ErrConflict, without writing fn's value.
func TestStoreUpdateConflict(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	calls := 0
	err := s.Update(ctx, "k", 5, func(old fence.Record) ([]byte, error) {
		calls++
		if err := s.Put(ctx, "k", 5, []byte{byte(calls)}); err != nil {
			return nil, err
		}
		return []byte("fn"), nil
	})
	if !errors.Is(err, fence.ErrConflict) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update with a same-token write in every attempt: got %v, want an error matching fence.ErrConflict only", err)
	}
	if calls != fence.UpdateAttempts {
		t.Errorf("fn called %d times, want fence.UpdateAttempts (%d)", calls, fence.UpdateAttempts)
	}
	if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != string([]byte{byte(calls)}) {
		t.Fatalf("Get: got %+v, %v, want the last same-token Put's value", r, err)
	}
}

// TestStoreUpdateNewerBetween: a newer holder's write between Update's read
// and write refuses the write with ErrStale and the newer token, and its
// value stays; the next Update of the older holder is refused before fn.
func TestStoreUpdateNewerBetween(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	err := s.Update(ctx, "k", 5, func(fence.Record) ([]byte, error) {
		if err := s.Put(ctx, "k", 8, []byte("new holder")); err != nil {
			t.Errorf("Put(token 8) inside fn: %v", err)
		}
		return []byte("old holder"), nil
	})
	fencewant.Stale(t, err, 5, 8)
	if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "new holder" || r.Token != 8 {
		t.Fatalf("Get: got %+v, %v, want the token-8 write", r, err)
	}
	calls := 0
	err = s.Update(ctx, "k", 5, func(fence.Record) ([]byte, error) { calls++; return nil, nil })
	fencewant.Stale(t, err, 5, 8)
	if calls != 0 {
		t.Errorf("fn called %d times under a newer floor, want 0", calls)
	}
}

// TestStoreUpdateFnErrorKeepsClaim: fn's error writes nothing of fn's, but
// the claim stays: an older token is refused afterwards.
func TestStoreUpdateFnErrorKeepsClaim(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "k", 3, []byte("v3")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Update(ctx, "k", 7, func(fence.Record) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Update: got %v, want fn's error", err)
	}
	if r, err := s.Get(ctx, "k"); err != nil || string(r.Value) != "v3" {
		t.Fatalf("Get: got %+v, %v, want v3 unchanged", r, err)
	}
	fencewant.Stale(t, s.Put(ctx, "k", 6, []byte("v6")), 6, 7)
}

// TestStoreGetForUpdateInTx: a Store over the caller's transaction claims
// in it: when the transaction rolls back, so does the claim.
func TestStoreGetForUpdateInTx(t *testing.T) {
	s, db := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "k", 3, []byte("v3")); err != nil {
		t.Fatal(err)
	}
	tx, err := db.(*pgxpool.Pool).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	inTx, err := postgres.NewStore(tx, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := inTx.GetForUpdate(ctx, "k", 7); err != nil || string(r.Value) != "v3" || r.Token != 7 {
		t.Fatalf("GetForUpdate(token 7) in a transaction: got %+v, %v, want v3 with token 7", r, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", 5, []byte("v5")); err != nil {
		t.Fatalf("Put(token 5) after the claim's transaction rolled back: got %v, want nil", err)
	}
}

// TestStoreGetForUpdateOldSchema: a store table whose value is NOT NULL
// cannot hold the floor-only row of a claim: a claim that writes (a key
// with no row, or a lower floor) fails with ErrSchema, which says how to
// fix it.
func TestStoreGetForUpdateOldSchema(t *testing.T) {
	pool := pgtest.NewPool(t)
	mustExec(t, pool, "CREATE TABLE fencelock_store (key text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0), value bytea NOT NULL)")
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", 3, []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"missing", "k"} {
		if _, err := s.GetForUpdate(t.Context(), key, 4); !errors.Is(err, postgres.ErrSchema) {
			t.Errorf("GetForUpdate(%q), value NOT NULL: got %v, want postgres.ErrSchema", key, err)
		}
	}
}
