package outboxtest

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// recordAgainAfterSettle: a settled effect, delivered or parked, is still
// recorded as far as a retry is concerned: recording it again (the writer
// retries a write whose outcome was unknown after a dispatcher delivered
// the first one) fails with outbox.ErrDuplicate and writes nothing, so
// the state change is not applied twice nor the effect delivered again.
func recordAgainAfterSettle(t *testing.T, h Harness) {
	delivered, parked := eff("acct", 5, 0), eff("acct", 5, 1)
	record(t, h, "acct", 5, delivered, parked)
	by := fence.Claim{Resource: "dispatcher", Token: 100}
	settle(t, h, by, outbox.Settled{Effect: delivered, Attempts: 1})
	wantPending(t, h, parked)
	settle(t, h, by, outbox.Settled{Effect: parked, Parked: "receiver answered 400", Attempts: 2})
	wantPending(t, h)
	for _, c := range []struct {
		name string
		e    outbox.Effect
	}{{"delivered", delivered}, {"parked", parked}} {
		err := h.Record(t.Context(), fence.Claim{Resource: "acct", Token: 5}, []outbox.Effect{c.e})
		if !errors.Is(err, outbox.ErrDuplicate) {
			t.Fatalf("recording the %s effect %s again: got %v, want an error matching outbox.ErrDuplicate", c.name, c.e.Key(), err)
		}
		wantPending(t, h)
	}
	// The control: a new effect of the same claim still records.
	fresh := eff("acct", 5, 2)
	record(t, h, "acct", 5, fresh)
	wantPending(t, h, fresh)
}
