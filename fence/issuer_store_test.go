package fence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/childtest"
)

func TestMemoryStoreIssuers(t *testing.T) {
	fencetest.RunIssuers(t, func(*testing.T) fence.Store { return fence.NewMemoryStore() })
}

// TestIssuersCatchesBlindStore is RunIssuers's control: a store that
// does not check issuers (it drops the name from each write's context)
// must fail it, comparing the tokens of two issuers as one.
func TestIssuersCatchesBlindStore(t *testing.T) {
	if childtest.InChild() {
		fencetest.RunIssuers(t, func(*testing.T) fence.Store { return issuerBlind{fence.NewMemoryStore()} })
		return
	}
	out := childtest.FailingOutput(t)
	for _, sub := range []string{"OtherIssuerRefused", "FloorWithoutIssuer", "GuardPassesIssuer"} {
		if !strings.Contains(out, "--- FAIL: TestIssuersCatchesBlindStore/"+sub) {
			t.Errorf("subtest %s did not fail against the store blind to issuers:\n%s", sub, out)
		}
	}
}

// issuerBlind is a MemoryStore whose writes name no issuer.
type issuerBlind struct{ *fence.MemoryStore }

func (s issuerBlind) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	return s.MemoryStore.Put(fence.ContextWithIssuer(ctx, ""), key, token, value)
}

// The MemoryStore checks the issuer of its reads for update and its
// read-modify-writes too.
func TestMemoryStoreIssuerOnUpdates(t *testing.T) {
	ctxA := fence.ContextWithIssuer(t.Context(), "a")
	ctxB := fence.ContextWithIssuer(t.Context(), "b")
	s := fence.NewMemoryStore()
	if err := s.Put(ctxA, "k", 5, []byte("v")); err != nil {
		t.Fatal(err)
	}
	keep := func(r fence.Record) ([]byte, error) { return r.Value, nil }
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"GetForUpdate", func() error { _, err := s.GetForUpdate(ctxB, "k", 9); return err }},
		{"Update", func() error { return s.Update(ctxB, "k", 9, keep) }},
		{"UpdateAll", func() error {
			return s.UpdateAll(ctxB, []fence.Claim{{Resource: "k", Token: 9}}, func(map[string]fence.Record) (map[string][]byte, error) { return nil, nil })
		}},
	} {
		if err := tt.call(); !errors.Is(err, fence.ErrIssuerMismatch) {
			t.Errorf("%s by another issuer: got %v, want ErrIssuerMismatch", tt.name, err)
		}
	}
	if r, _ := s.Get(t.Context(), "k"); r.Token != 5 {
		t.Fatalf("got token %d, want 5: a refused call changed the floor", r.Token)
	}
	if err := s.Update(ctxA, "k", 6, keep); err != nil {
		t.Fatalf("Update by the key's issuer: got %v, want nil", err)
	}
}

// An UpdateAll whose claims span keys of two issuers is refused whole,
// before fn runs: no floor moves, not even the matching key's.
func TestMemoryStoreUpdateAllMixedIssuers(t *testing.T) {
	ctxA := fence.ContextWithIssuer(t.Context(), "a")
	s := fence.NewMemoryStore()
	if err := s.Put(ctxA, "ka", 5, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(fence.ContextWithIssuer(t.Context(), "b"), "kb", 5, []byte("b")); err != nil {
		t.Fatal(err)
	}
	ran := false
	err := s.UpdateAll(ctxA, []fence.Claim{{Resource: "ka", Token: 9}, {Resource: "kb", Token: 9}},
		func(map[string]fence.Record) (map[string][]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, fence.ErrIssuerMismatch) || ran {
		t.Fatalf("UpdateAll across two issuers' keys: got %v (fn ran: %v), want ErrIssuerMismatch before fn", err, ran)
	}
	for _, k := range []string{"ka", "kb"} {
		if r, _ := s.Get(t.Context(), k); r.Token != 5 {
			t.Errorf("%s: got token %d, want 5: a refused UpdateAll moved a floor", k, r.Token)
		}
	}
}

// A MemoryStore made with RequireIssuer refuses writes that name none.
func TestMemoryStoreRequiredIssuer(t *testing.T) {
	fencetest.RunRequiredIssuer(t, func(*testing.T) fence.Store { return fence.NewMemoryStore(fence.RequireIssuer()) })
}

// TestRequiredIssuerCatchesPlainStore is RunRequiredIssuer's control: a
// MemoryStore without RequireIssuer compares an unnamed write by token
// alone, and must fail the cases of unnamed writes.
func TestRequiredIssuerCatchesPlainStore(t *testing.T) {
	if childtest.InChild() {
		fencetest.RunRequiredIssuer(t, func(*testing.T) fence.Store { return fence.NewMemoryStore() })
		return
	}
	out := childtest.FailingOutput(t)
	for _, sub := range []string{"UnnamedPutRefused", "UnnamedGuardRefused", "UnnamedClaimRefused"} {
		if !strings.Contains(out, "--- FAIL: TestRequiredIssuerCatchesPlainStore/"+sub) {
			t.Errorf("subtest %s did not fail against a store that does not require issuers:\n%s", sub, out)
		}
	}
}

// The requirement's error says what to add, and a nil option is ignored.
func TestRequireIssuerMessage(t *testing.T) {
	s := fence.NewMemoryStore(nil, fence.RequireIssuer())
	err := s.Put(t.Context(), "k", 1, nil)
	for _, want := range []string{`"k"`, "names no issuer", "WithIssuer", "fence.ContextWithIssuer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error saying %q", err, want)
		}
	}
}
