package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// Two issuers' first writes to a fresh key race: the issuer and the token
// are checked in one statement, so exactly one lands and the other is
// refused with ErrIssuerMismatch, whichever comes first and whatever the
// tokens; the key holds the one that landed.
func TestStoreIssuerFirstWritesRace(t *testing.T) {
	s := newIssuerStore(t, true)
	for i := range 20 {
		k := fmt.Sprintf("race-%d", i)
		var wg sync.WaitGroup
		errs := map[string]error{}
		var mu sync.Mutex
		for _, w := range []struct {
			issuer string
			tok    fence.Token
		}{{"a", 5}, {"b", 9}} {
			wg.Go(func() {
				err := s.Put(fence.ContextWithIssuer(t.Context(), w.issuer), k, w.tok, []byte(w.issuer))
				mu.Lock()
				errs[w.issuer] = err
				mu.Unlock()
			})
		}
		wg.Wait()
		won := ""
		for iss, err := range errs {
			switch {
			case err == nil && won == "":
				won = iss
			case err == nil:
				t.Fatalf("%s: both issuers' writes landed", k)
			case !errors.Is(err, fence.ErrIssuerMismatch):
				t.Fatalf("%s: %s's write: got %v, want nil or ErrIssuerMismatch", k, iss, err)
			}
		}
		if r, err := s.Get(t.Context(), k); err != nil || string(r.Value) != won {
			t.Fatalf("%s: got %q (%v), want %q, the write that landed", k, r.Value, err, won)
		}
	}
}
