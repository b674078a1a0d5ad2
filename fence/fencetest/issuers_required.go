package fencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// RunRequiredIssuer runs the cases of a store made to require issuers
// ([fence.RequireIssuer] for a [fence.MemoryStore], fence/postgres's
// RequireIssuer for its Store) as subtests of t. A store passes when a
// write whose context names no issuer, made directly or through a
// [fence.Guard] whose holder names none, is refused with an error
// matching [fence.ErrIssuerRequired] and [fence.ErrInvalidArgument]
// (and not [fence.ErrStale]) and changes nothing, not even a key's
// floor; and when a named write lands. When the store is a
// [fence.Updater], its GetForUpdate and Update are held to the same, and
// must refuse another issuer's claim with [fence.ErrIssuerMismatch]
// before fn runs.
//
// newStore must return a store that requires issuers. Run the store's
// own control beside it: the same store without the requirement accepts
// an unnamed write.
func RunRequiredIssuer(t *testing.T, newStore NewStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s fence.Store)
	}{
		{"UnnamedPutRefused", testUnnamedPutRefused},
		{"UnnamedGuardRefused", testUnnamedGuardRefused},
		{"UnnamedClaimRefused", testUnnamedClaimRefused},
		{"OtherIssuerClaimRefused", testOtherIssuerClaimRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newStore(t))
		})
	}
}

// wantRequired fails t unless err matches ErrIssuerRequired and
// ErrInvalidArgument, and not ErrStale.
func wantRequired(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, fence.ErrIssuerRequired) || !errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("%s naming no issuer: got %v, want an error matching fence.ErrIssuerRequired and fence.ErrInvalidArgument", what, err)
	}
}

// unnamed is t's context with no issuer's name.
func unnamed(t *testing.T) context.Context { return fence.ContextWithIssuer(t.Context(), "") }

func testUnnamedPutRefused(t *testing.T, s fence.Store) {
	k := key(t)
	wantRequired(t, "Put", s.Put(unnamed(t), k, 9, value(9, 1)))
	if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("after the refused Put: Get got %v, want fence.ErrNotFound (nothing written)", err)
	}
	// The refused write left no floor: a lower named token lands.
	if err := putBy(t, s, "lock-service-a", k, 5, 2); err != nil {
		t.Fatalf("a named write after the refused one: got %v, want nil", err)
	}
	wantRecord(t, s, k, 5, 2)
	wantRequired(t, "Put", s.Put(unnamed(t), k, 9, value(9, 3)))
	wantRecord(t, s, k, 5, 2)
}

func testUnnamedGuardRefused(t *testing.T, s fence.Store) {
	k := key(t)
	h, err := fence.NewHolder(7, make(chan struct{})) // names no issuer
	if err != nil {
		t.Fatal(err)
	}
	g, err := fence.NewGuard(h)
	if err != nil {
		t.Fatal(err)
	}
	// The caller's context names one; the Guard of a holder naming none
	// clears it, so the write names none.
	ctx := fence.ContextWithIssuer(t.Context(), "lock-service-a")
	wantRequired(t, "a Guard's Put", g.Put(ctx, s, k, value(7, 1)))
	if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("after the refused write: Get got %v, want fence.ErrNotFound", err)
	}
}

func testUnnamedClaimRefused(t *testing.T, s fence.Store) {
	u, ok := s.(fence.Updater)
	if !ok {
		return // Put alone: checked above
	}
	k := key(t)
	mustPutBy(t, s, "lock-service-a", k, 5, 1)
	_, err := u.GetForUpdate(unnamed(t), k, 9)
	wantRequired(t, "GetForUpdate", err)
	called := false
	err = u.Update(unnamed(t), k, 9, func(r fence.Record) ([]byte, error) { called = true; return r.Value, nil })
	wantRequired(t, "Update", err)
	if called {
		t.Fatal("Update naming no issuer called fn")
	}
	// Nothing moved the floor: the key's issuer's token 6 lands.
	mustPutBy(t, s, "lock-service-a", k, 6, 2)
	wantRecord(t, s, k, 6, 2)
}

func testOtherIssuerClaimRefused(t *testing.T, s fence.Store) {
	u, ok := s.(fence.Updater)
	if !ok {
		return
	}
	k := key(t)
	mustPutBy(t, s, "lock-service-a", k, 5, 1)
	ctxB := fence.ContextWithIssuer(t.Context(), "lock-service-b")
	_, err := u.GetForUpdate(ctxB, k, 9)
	wantMismatch(t, err)
	called := false
	err = u.Update(ctxB, k, 9, func(r fence.Record) ([]byte, error) { called = true; return r.Value, nil })
	wantMismatch(t, err)
	if called {
		t.Fatal("Update of another issuer's token called fn")
	}
	// Its own issuer's claim and update go on.
	ctxA := fence.ContextWithIssuer(t.Context(), "lock-service-a")
	if err := u.Update(ctxA, k, 6, func(fence.Record) ([]byte, error) { return value(6, 2), nil }); err != nil {
		t.Fatalf("the key's issuer's Update: got %v, want nil", err)
	}
	wantRecord(t, s, k, 6, 2)
}

// mustPutBy is putBy that must land.
func mustPutBy(t *testing.T, s fence.Store, issuer, k string, tok fence.Token, seq int) {
	t.Helper()
	if err := putBy(t, s, issuer, k, tok, seq); err != nil {
		t.Fatalf("Put(%q, %d) by %s: got %v, want nil", k, tok, issuer, err)
	}
}
