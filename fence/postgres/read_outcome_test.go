package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// lockRow locks the row of table whose column col is key, in a transaction
// until release is called.
func lockRow(t *testing.T, pool *pgxpool.Pool, table, col, key string) (release func()) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM "+table+" WHERE "+col+" = $1 FOR UPDATE", key); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(context.Background()) }
}

// TestClaimCancelledWhileWaiting cancels a fenced read (a claim, which
// writes the floor) while it waits on the row's lock: it was sent, so its
// outcome is unknown, and it says so; the control cancels before the call,
// a known failure.
func TestClaimCancelledWhileWaiting(t *testing.T) {
	var b int64
	inc := func(fence.Record) ([]byte, error) { return []byte("w"), nil }
	tests := []struct {
		name            string
		table, col, key string
		call            func(ctx context.Context, tbl *postgres.Table, s *postgres.Store, db postgres.DB) error
	}{
		{"Table.GetForUpdate", "accounts", "id", "a", func(ctx context.Context, tbl *postgres.Table, _ *postgres.Store, db postgres.DB) error {
			return tbl.GetForUpdate(ctx, db, "a", 2, []string{"balance"}, &b)
		}},
		{"Store.GetForUpdate", postgres.DefaultStoreTable, "key", "k", func(ctx context.Context, _ *postgres.Table, s *postgres.Store, _ postgres.DB) error {
			_, err := s.GetForUpdate(ctx, "k", 2)
			return err
		}},
		{"Store.Update", postgres.DefaultStoreTable, "key", "k", func(ctx context.Context, _ *postgres.Table, s *postgres.Store, _ postgres.DB) error {
			return s.Update(ctx, "k", 2, inc)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl, s := newClaimable(t)
			call := func(ctx context.Context) error { return tt.call(ctx, tbl, s, pool) }
			release := lockRow(t, pool, tt.table, tt.col, tt.key)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- call(ctx) }()
			waitLockWaiters(t, pool, 1)
			cancel()
			err := <-errc
			release()
			fencewant.Unknown(t, err, 2)
			if err := call(cancelled(t)); !errors.Is(err, context.Canceled) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("with a cancelled context: got %v, want context.Canceled, a known failure", err)
			}
		})
	}
}

// newClaimable returns a fresh database with the row 'a' of accounts and
// the key "k" of a Store.
func newClaimable(t *testing.T) (*pgxpool.Pool, *postgres.Table, *postgres.Store) {
	t.Helper()
	pool, tbl := newAccounts(t)
	mustExec(t, pool, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 1)")
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", 1, []byte("v")); err != nil {
		t.Fatal(err)
	}
	return pool, tbl, s
}

// TestStoreUpdateWriteCancelledWhileWaiting cancels Store.Update's final
// write (the conditional swap) while it waits on the row's lock, taken by
// another session while fn ran: the swap was sent, so Update says the
// outcome is unknown; the key then holds the old value or fn's, never
// anything else, and an Update after it counts from what is there, the
// late swap landing, if at all, only over the record fn saw.
func TestStoreUpdateWriteCancelledWhileWaiting(t *testing.T) {
	pool, _, s := newClaimable(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	claimed, locked := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.Update(ctx, "k", 2, func(old fence.Record) ([]byte, error) {
			close(claimed) // the claim committed: the row is free to lock
			<-locked
			return []byte("fn's"), nil
		})
	}()
	<-claimed
	release := lockRow(t, pool, postgres.DefaultStoreTable, "key", "k")
	close(locked)
	waitLockWaiters(t, pool, 1)
	cancel()
	err := <-errc
	release()
	fencewant.Unknown(t, err, 2)
	// The swap may still land after Update gave up (the server ran it
	// once the lock was released, before the cancel reached it): a late
	// copy that must land only over the record fn saw ("v"), never over a
	// later Update's.
	if err := s.Update(t.Context(), "k", 2, func(old fence.Record) ([]byte, error) { return append(old.Value, '+'), nil }); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if v := string(r.Value); v != "v+" && v != "fn's+" {
		t.Fatalf("after a write of unknown outcome and an Update: got %q, want \"v+\" or \"fn's+\" (the late write landed over the later Update, or was lost)", v)
	}
}
