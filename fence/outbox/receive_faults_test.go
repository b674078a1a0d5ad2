package outbox_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// lossyStore is a MemoryStore whose Update number lose (from 1) lands and
// then reports an unknown outcome, as a store whose reply was lost does.
type lossyStore struct {
	*fence.MemoryStore
	lose    int32
	updates atomic.Int32
}

func (s *lossyStore) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	err := s.MemoryStore.Update(ctx, key, token, fn)
	if s.updates.Add(1) == s.lose && err == nil {
		return errReplyLost
	}
	return err
}

// TestReceiptsBeginReplyLost: a Begin whose claim of the key landed but
// whose reply was lost releases the key, as Begin's doc says, so that the
// sender's retry runs the handler instead of meeting "in flight" for the
// pending timeout (a minute by default, longer than a dispatcher's
// default retries: the effect would be parked). Control: the claim is
// indeed left pending when nobody releases it.
func TestReceiptsBeginReplyLost(t *testing.T) {
	key := outbox.Key("invoice-7", 7, 0)
	store := &lossyStore{MemoryStore: fence.NewMemoryStore(), lose: 1}
	r, err := outbox.NewReceipts(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Begin(t.Context(), key, inv7); !errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Begin with its reply lost: got %v, want an error matching fence.ErrUnknownOutcome", err)
	}
	d, err := r.Begin(t.Context(), key, inv7)
	if err != nil {
		t.Fatalf("the retry's Begin: got %v, want the delivery let through", err)
	}
	if d.Replay != nil || d.Stale != nil {
		t.Fatalf("the retry's Begin: got replay %v, stale %v, want a first delivery", d.Replay, d.Stale)
	}
	if err := d.Finish(t.Context(), outbox.Answer{Status: http.StatusOK}); err != nil {
		t.Fatalf("Finish: got %v, want nil", err)
	}

	t.Run("control: left pending", func(t *testing.T) {
		r, err := outbox.NewReceipts(fence.NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Begin(t.Context(), key, inv7); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Begin(t.Context(), key, inv7); !errors.Is(err, outbox.ErrInFlight) {
			t.Fatalf("a second Begin while the first is pending: got %v, want ErrInFlight", err)
		}
	})
}

// TestDeliveryReplayCalls: Finish and Release on a replay (which holds
// nothing) and on the zero Delivery return nil, as Release does, rather
// than panic; a transport's generic "settle what Begin gave" path calls
// them.
func TestDeliveryReplayCalls(t *testing.T) {
	key := outbox.Key("invoice-7", 7, 0)
	r, err := outbox.NewReceipts(fence.NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Begin(t.Context(), key, inv7)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Finish(t.Context(), outbox.Answer{Status: http.StatusCreated}); err != nil {
		t.Fatal(err)
	}
	again, err := r.Begin(t.Context(), key, inv7)
	if err != nil || again.Replay == nil {
		t.Fatalf("a repeat's Begin: got %+v, %v, want a replay", again, err)
	}
	for name, d := range map[string]*outbox.Delivery{"replay": again, "zero": {}} {
		for call, f := range map[string]func() error{
			"Finish":  func() error { return d.Finish(t.Context(), outbox.Answer{Status: http.StatusOK}) },
			"Release": func() error { return d.Release(t.Context()) },
		} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s on a %s Delivery panicked: %v", call, name, p)
					}
				}()
				if err := f(); err != nil {
					t.Errorf("%s on a %s Delivery: got %v, want nil", call, name, err)
				}
			}()
		}
	}
	again2, err := r.Begin(t.Context(), key, inv7)
	if err != nil || again2.Replay == nil || again2.Replay.Status != http.StatusCreated {
		t.Fatalf("after the replay's calls: got %+v, %v, want the first answer (201) replayed", again2, err)
	}
}
