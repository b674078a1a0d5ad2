package fence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// issuingHolder is a holder whose lock service answers Issued as told, or
// never (a service cut off).
type issuingHolder struct {
	*holder
	issued bool
	hang   bool
	asked  atomic.Int32
}

func (h *issuingHolder) Issued(ctx context.Context, t fence.Token) (bool, error) {
	h.asked.Add(1)
	if h.hang {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return h.issued, nil
}

// stale returns a store whose floor for "k" is above tok.
func stale(t *testing.T, tok fence.Token) *fence.MemoryStore {
	s := fence.NewMemoryStore()
	if err := s.Put(t.Context(), "k", tok+10, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGuardTokenRegressed(t *testing.T) {
	for _, tt := range []struct {
		name      string
		issued    bool
		lost      bool
		wantAsked int32
		regressed bool
	}{
		{"never issued", false, false, 1, true},
		{"issued: a newer holder", true, false, 1, false},
		{"holder knows it lost the lock: not asked", false, true, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &issuingHolder{holder: newHolder(5), issued: tt.issued}
			g, err := fence.NewGuard(h)
			if err != nil {
				t.Fatal(err)
			}
			if tt.lost { // the write's local check passed; the loss is learnt as it goes out
				err = g.Do(t.Context(), func(ctx context.Context, tok fence.Token) error {
					close(h.done)
					return stale(t, 5).Put(ctx, "k", tok, nil)
				})
			} else {
				err = g.Put(t.Context(), stale(t, 5), "k", nil)
			}
			if !errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrTokenRegressed) != tt.regressed || h.asked.Load() != tt.wantAsked {
				t.Fatalf("got %v (asked %d times), want ErrStale, regressed %v, asked %d", err, h.asked.Load(), tt.regressed, tt.wantAsked)
			}
		})
	}
}

// A lock service that does not answer holds the refusal up no longer than
// the question's bound, and the refusal stays a plain ErrStale.
func TestGuardTokenRegressedServiceHangs(t *testing.T) {
	h := &issuingHolder{holder: newHolder(5), hang: true}
	g, _ := fence.NewGuard(h)
	start := time.Now()
	err := g.Put(context.Background(), stale(t, 5), "k", nil)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the refusal took %v with the lock service hanging", d)
	}
	if !errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrTokenRegressed) {
		t.Fatalf("got %v, want ErrStale alone", err)
	}
}

// A Guard whose holder names no issuer sends writes that name none, even
// inside another Guard's write, whose context names that Guard's issuer:
// its tokens must not be taken for the other issuer's (admitted on, or
// refused by, that issuer's keys).
func TestGuardOfUnnamedHolderClearsIssuer(t *testing.T) {
	done := make(chan struct{})
	named, err := fence.NewHolder(3, done, fence.WithIssuer("redis:a"))
	if err != nil {
		t.Fatal(err)
	}
	unnamed, err := fence.NewHolder(100, done) // an etcd lock's, say
	if err != nil {
		t.Fatal(err)
	}
	gn, _ := fence.NewGuard(named)
	gu, _ := fence.NewGuard(unnamed)
	s := fence.NewMemoryStore()
	if err := s.Put(fence.ContextWithIssuer(t.Context(), "redis:b"), "b", 7, nil); err != nil {
		t.Fatal(err)
	}
	err = gn.Do(t.Context(), func(ctx context.Context, _ fence.Token) error {
		return gu.Put(ctx, s, "b", []byte("unnamed")) // nested in gn's write
	})
	if err != nil {
		t.Fatalf("unnamed holder's write inside a named one's: got %v, want nil (a write naming no issuer is not checked)", err)
	}
}
