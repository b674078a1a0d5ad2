package pgadvisory_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// Two clients whose search_path finds two sequences of the same name take
// tokens from two counters: their default issuers must differ, so that a
// checking store does not order one's tokens against the other's. Here A,
// paused, holds token 11 of public's sequence; B, after it, token 1 of
// s2's; A's late write must not land over B's.
func TestIssuerNamesTheSequenceFound(t *testing.T) {
	cfg, pool := database(t)
	for _, q := range []string{
		"CREATE SCHEMA s2",
		"CREATE SEQUENCE s2.fencelock_advisory_token",
		"SELECT setval('public.fencelock_advisory_token', 10)",
	} {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfgB := cfg.Copy()
	cfgB.RuntimeParams["search_path"] = "s2"
	key := lockKey()
	a := acquire(t, cfg, key)
	paused, err := fence.NewHolder(a.Token(), make(chan struct{}), fence.WithIssuer(a.Issuer()))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := acquire(t, cfgB, key)
	if a.Issuer() == b.Issuer() {
		t.Errorf("issuers: both %q, want two (tokens %d and %d of two sequences)", a.Issuer(), a.Token(), b.Token())
	}
	store := fence.NewMemoryStore()
	gb, _ := fence.NewGuard(b)
	if err := gb.Put(t.Context(), store, "report", []byte("B")); err != nil {
		t.Fatal(err)
	}
	ga, _ := fence.NewGuard(paused)
	if err := ga.Put(t.Context(), store, "report", []byte("A")); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("A's late write: got %v, want ErrIssuerMismatch", err)
	}
}
