package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// newIssuerStore returns a Store on a fresh table, with the issuer column
// when withColumn, made with opts.
func newIssuerStore(t *testing.T, withColumn bool, opts ...postgres.StoreOption) *postgres.Store {
	t.Helper()
	pool := pgtest.NewPool(t)
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable}, opts...)
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

// A Store made with RequireIssuer refuses writes and claims that name no
// issuer, before any I/O, and checks the issuer of claims.
func TestStoreRequiredIssuer(t *testing.T) {
	fencetest.RunRequiredIssuer(t, func(t *testing.T) fence.Store { return newIssuerStore(t, true, postgres.RequireIssuer()) })
}

// The control: without RequireIssuer, a write that names no issuer lands
// on a key whose issuer is recorded, compared by token alone.
func TestStoreNotRequiredIssuerAcceptsUnnamed(t *testing.T) {
	s := newIssuerStore(t, true)
	if err := s.Put(fence.ContextWithIssuer(t.Context(), "a"), "k", 5, []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", 9, []byte("unnamed")); err != nil {
		t.Fatalf("an unnamed write without RequireIssuer: got %v, want nil", err)
	}
	if _, err := s.GetForUpdate(t.Context(), "k", 10); err != nil {
		t.Fatalf("an unnamed claim without RequireIssuer: got %v, want nil", err)
	}
}

// A Store that requires issuers on a table without the issuer column
// fails with ErrSchema, saying how to add it, and writes nothing.
func TestStoreRequiredIssuerWithoutColumn(t *testing.T) {
	s := newIssuerStore(t, false, postgres.RequireIssuer())
	ctx := fence.ContextWithIssuer(t.Context(), "a")
	for name, call := range map[string]func() error{
		"Put":          func() error { return s.Put(ctx, "k", 5, []byte("v")) },
		"GetForUpdate": func() error { _, err := s.GetForUpdate(ctx, "k", 5); return err },
	} {
		err := call()
		if !errors.Is(err, postgres.ErrSchema) || !strings.Contains(err.Error(), "ADD COLUMN issuer") {
			t.Errorf("%s: got %v, want ErrSchema saying ADD COLUMN issuer", name, err)
		}
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after the refused writes: got %v, want ErrNotFound", err)
	}
}

// A claim checks the issuer on its read-only path too: a key claimed at
// token 5 by a is not read as claimed by b at the same token, and a key
// whose floor names no issuer is claimed by b with its name recorded.
func TestStoreIssuerRepeatedClaim(t *testing.T) {
	s := newIssuerStore(t, true)
	ctxA := fence.ContextWithIssuer(t.Context(), "a")
	ctxB := fence.ContextWithIssuer(t.Context(), "b")
	if err := s.Put(ctxA, "k", 5, []byte("A")); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetForUpdate(ctxA, "k", 5); err != nil || string(r.Value) != "A" {
		t.Fatalf("a's repeated claim: got %v, %v; want A, nil", r, err)
	}
	if _, err := s.GetForUpdate(ctxB, "k", 5); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("b's claim at a's token: got %v, want ErrIssuerMismatch", err)
	}
	if err := s.Put(t.Context(), "n", 5, []byte("N")); err != nil { // names none
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(ctxB, "n", 5); err != nil {
		t.Fatalf("b's claim of a floor naming none: got %v, want nil", err)
	}
	if err := s.Put(ctxA, "n", 6, []byte("A")); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("a's write after b's claim recorded b: got %v, want ErrIssuerMismatch", err)
	}
}

// A Store that requires issuers finds the column added after its refusal,
// without a restart.
func TestStoreRequiredIssuerColumnAddedLater(t *testing.T) {
	pool := pgtest.NewPool(t)
	s, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable}, postgres.RequireIssuer())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := fence.ContextWithIssuer(t.Context(), "a")
	if err := s.Put(ctx, "k", 5, []byte("v")); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("without the column: got %v, want ErrSchema", err)
	}
	mustExec(t, pool, "ALTER TABLE fencelock_store ADD COLUMN issuer text")
	if err := s.Put(ctx, "k", 5, []byte("v")); err != nil {
		t.Fatalf("after the column was added: got %v, want nil", err)
	}
}
