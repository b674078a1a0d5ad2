package fencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// RunIssuers runs the cases of tokens from two issuers (see
// [fence.IssuerNamer]) as subtests of t, for a store that checks them:
// [fence.MemoryStore], and fence/postgres's Store with its issuer column.
// The other stores do not, and do not run it. A store passes when a write
// whose token comes from another issuer than the key's is refused with
// [fence.ErrIssuerMismatch] and changes nothing, whether its token is
// higher or lower; when a key whose floor names no issuer (written before
// issuers, or by a holder that names none) accepts the first issuer's
// writes and then refuses another's; and when a write that names none is
// not checked. Only Put is checked here: a store may check its reads for
// update too, as MemoryStore and fence/postgres's Store do
// ([RunRequiredIssuer] checks them).
func RunIssuers(t *testing.T, newStore NewStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s fence.Store)
	}{
		{"OtherIssuerRefused", testOtherIssuer},
		{"FloorWithoutIssuer", testFloorWithoutIssuer},
		{"GuardPassesIssuer", testGuardPassesIssuer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newStore(t))
		})
	}
}

// putBy is a Put of token by a holder of issuer's tokens.
func putBy(t *testing.T, s fence.Store, issuer, k string, tok fence.Token, seq int) error {
	t.Helper()
	return s.Put(fence.ContextWithIssuer(t.Context(), issuer), k, tok, value(tok, seq))
}

// wantMismatch fails t unless err matches ErrIssuerMismatch and not
// ErrStale.
func wantMismatch(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, fence.ErrIssuerMismatch) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v, want an error matching fence.ErrIssuerMismatch (and not ErrStale)", err)
	}
}

func testOtherIssuer(t *testing.T, s fence.Store) {
	k := key(t)
	if err := putBy(t, s, "lock-service-a", k, 5, 1); err != nil {
		t.Fatalf("first write: got %v, want nil", err)
	}
	wantMismatch(t, putBy(t, s, "lock-service-b", k, 9, 2)) // higher, but not comparable
	wantMismatch(t, putBy(t, s, "lock-service-b", k, 3, 3))
	wantRecord(t, s, k, 5, 1)
	if err := putBy(t, s, "lock-service-a", k, 6, 4); err != nil {
		t.Fatalf("the key's issuer's next write: got %v, want nil", err)
	}
	wantRecord(t, s, k, 6, 4)
}

func testFloorWithoutIssuer(t *testing.T, s fence.Store) {
	k := key(t)
	mustPut(t, s, k, 5, 1) // names no issuer, as before issuers
	if err := putBy(t, s, "lock-service-a", k, 6, 2); err != nil {
		t.Fatalf("a named write on a floor without issuer: got %v, want nil", err)
	}
	wantMismatch(t, putBy(t, s, "lock-service-b", k, 7, 3))
	mustPut(t, s, k, 8, 4) // names none: not checked
	wantRecord(t, s, k, 8, 4)
}

func testGuardPassesIssuer(t *testing.T, s fence.Store) {
	k := key(t)
	guard := func(issuer string, tok fence.Token) *fence.Guard {
		h, err := fence.NewHolder(tok, make(chan struct{}), fence.WithIssuer(issuer))
		if err != nil {
			t.Fatal(err)
		}
		g, err := fence.NewGuard(h)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if err := guard("lock-service-a", 5).Put(t.Context(), s, k, value(5, 1)); err != nil {
		t.Fatalf("first write: got %v, want nil", err)
	}
	err := guard("lock-service-b", 9).Do(context.WithoutCancel(t.Context()), func(ctx context.Context, tok fence.Token) error {
		return s.Put(ctx, k, tok, value(tok, 2))
	})
	wantMismatch(t, err)
	wantRecord(t, s, k, 5, 1)
}
