package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// A Put that waits on a transaction holding its key's row ends that
// transaction when it is an older token's (preemption), but tokens of two
// issuers are not comparable: issuer b's token 9 must not end issuer a's
// transaction at token 5, which is live and commits. The control: a's own
// newer token 9 ends it.
func TestStoreIssuerPreemptsOnlyOwnIssuer(t *testing.T) {
	for _, tt := range []struct {
		name      string
		waiter    string
		wantEnded bool
	}{
		{"other issuer", "b", false},
		{"control: same issuer", "a", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pool := pgtest.NewPool(t)
			s := newIssuerStoreOn(t, pool)
			ctxA := fence.ContextWithIssuer(t.Context(), "a")
			if err := s.Put(ctxA, "k", 3, []byte("a3")); err != nil {
				t.Fatal(err)
			}
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			sa, err := postgres.NewStore(tx, pgx.Identifier{postgres.DefaultStoreTable})
			if err != nil {
				t.Fatal(err)
			}
			if err := sa.Put(ctxA, "k", 5, []byte("a5")); err != nil {
				t.Fatal(err)
			}
			// The waiter gives up after a second: preemption looks after
			// 100 ms, then every 250 ms.
			wctx, cancel := context.WithTimeout(fence.ContextWithIssuer(t.Context(), tt.waiter), time.Second)
			defer cancel()
			werr := s.Put(wctx, "k", 9, []byte(tt.waiter+"9"))
			cerr := tx.Commit(t.Context())
			ended := cerr != nil
			if ended != tt.wantEnded {
				t.Fatalf("waiter %s's Put: %v; a's transaction's commit: got %v, want ended %v", tt.waiter, werr, cerr, tt.wantEnded)
			}
			if !tt.wantEnded && (werr == nil || errors.Is(werr, fence.ErrStale)) {
				t.Fatalf("waiter %s's Put: got %v, want its context's end or ErrIssuerMismatch", tt.waiter, werr)
			}
		})
	}
}

// newIssuerStoreOn is newIssuerStore on pool, with the issuer column.
func newIssuerStoreOn(t *testing.T, pool postgres.DB) *postgres.Store {
	t.Helper()
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, "ALTER TABLE fencelock_store ADD COLUMN issuer text")
	return s
}
