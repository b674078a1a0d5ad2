package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// newIssuerStore returns a Store on a fresh table, with the issuer column
// when withColumn.
func newIssuerStore(t *testing.T, withColumn bool) *postgres.Store {
	t.Helper()
	pool := pgtest.NewPool(t)
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	if withColumn {
		mustExec(t, pool, "ALTER TABLE fencelock_store ADD COLUMN issuer text")
	}
	return s
}

// With the issuer column, the Store checks issuers (fencetest.RunIssuers).
func TestStoreIssuers(t *testing.T) {
	s := newIssuerStore(t, true)
	fencetest.RunIssuers(t, func(*testing.T) fence.Store { return s })
}

// The control: without the column (a table made before it), the tokens of
// two issuers are compared as one, and the other issuer's higher token
// lands, as before issuers.
func TestStoreIssuersWithoutColumn(t *testing.T) {
	s := newIssuerStore(t, false)
	ctxA := fence.ContextWithIssuer(t.Context(), "a")
	ctxB := fence.ContextWithIssuer(t.Context(), "b")
	if err := s.Put(ctxA, "k", 5, []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctxB, "k", 9, []byte("B")); err != nil {
		t.Fatalf("another issuer's write without the column: got %v, want nil", err)
	}
	if err := s.Put(ctxA, "k", 6, []byte("A")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v, want ErrStale", err)
	}
}

// A Delete names its issuer too; bad input is refused before the Store
// looks for the column.
func TestStoreIssuerDeleteAndInput(t *testing.T) {
	s := newIssuerStore(t, true)
	ctxA := fence.ContextWithIssuer(t.Context(), "a")
	ctxB := fence.ContextWithIssuer(t.Context(), "b")
	if err := s.Put(ctxA, "k", 5, []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctxB, "k", 9); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("another issuer's Delete: got %v, want ErrIssuerMismatch", err)
	}
	if err := s.Put(ctxB, "", 5, nil); !errors.Is(err, fence.ErrInvalidKey) {
		t.Fatalf("empty key: got %v, want ErrInvalidKey", err)
	}
	if err := s.Put(ctxB, "k", 0, nil); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("token 0: got %v, want ErrInvalidToken", err)
	}
}
