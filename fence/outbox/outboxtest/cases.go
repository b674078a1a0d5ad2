package outboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

var cases = []testCase{
	{"PendingInRecordingOrder", pendingInOrder},
	{"PayloadRoundTrip", payloadRoundTrip},
	{"StaleWriteRecordsNothing", staleRecordsNothing},
	{"Duplicate", duplicate},
	{"InvalidEffect", invalidEffect},
	{"TooLarge", tooLarge},
	{"SettleDelivered", settleDelivered},
	{"SettleParked", settleParked},
	{"SettleStaleDispatcher", settleStale},
	{"SettleTwiceAndUnknown", settleTwice},
	{"RecordAgainAfterSettle", recordAgainAfterSettle},
	{"ScopeSkipLimit", scopeSkipLimit},
	{"Watch", watch},
}

func eff(res string, tok fence.Token, seq int64) outbox.Effect {
	return outbox.Effect{Resource: res, Token: tok, Seq: seq, Destination: "http://receiver.test/" + res, Payload: fmt.Appendf(nil, "%s/%d/%d", res, tok, seq)}
}

func record(t *testing.T, h Harness, res string, tok fence.Token, effects ...outbox.Effect) {
	t.Helper()
	if err := h.Record(t.Context(), fence.Claim{Resource: res, Token: tok}, effects); err != nil {
		t.Fatalf("Record(%s, token %d, %d effects): got error %v, want nil", res, tok, len(effects), err)
	}
}

func pending(t *testing.T, h Harness, s outbox.Scope, skip []string, limit int) []outbox.Effect {
	t.Helper()
	got, err := h.Log.Pending(t.Context(), s, skip, limit)
	if err != nil {
		t.Fatalf("Pending(%v, skip %q, %d): got error %v, want nil", s, skip, limit, err)
	}
	return got
}

func keys(es []outbox.Effect) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Resource + "/" + e.Token.String() + "/" + fmt.Sprint(e.Seq)
	}
	return out
}

func wantPending(t *testing.T, h Harness, want ...outbox.Effect) {
	t.Helper()
	got := keys(pending(t, h, outbox.All, nil, 1000))
	if w := keys(want); !slices.Equal(got, w) {
		t.Fatalf("Pending: got %q, want %q", got, w)
	}
}

func settle(t *testing.T, h Harness, by fence.Claim, done ...outbox.Settled) {
	t.Helper()
	if err := h.Log.Settle(t.Context(), by, done); err != nil {
		t.Fatalf("Settle(by %s@%d, %d): got error %v, want nil", by.Resource, by.Token, len(done), err)
	}
}

// pendingInOrder: effects come back in the order they were recorded, per
// resource in the order of the writes and of each write's slice, whatever
// their Seq.
func pendingInOrder(t *testing.T, h Harness) {
	a0, a1, b0, a2, a3 := eff("acct-a", 5, 7), eff("acct-a", 5, 3), eff("acct-b", 6, 0), eff("acct-a", 9, 0), eff("acct-a", 9, 1)
	record(t, h, "acct-a", 5, a0, a1)
	record(t, h, "acct-b", 6, b0)
	record(t, h, "acct-a", 9, a2, a3)
	wantPending(t, h, a0, a1, b0, a2, a3)
}

func payloadRoundTrip(t *testing.T, h Harness) {
	e := eff("res-π", 3, 0)
	e.Payload = []byte{0, 1, 2, 0xff, 0, '\n'}
	e.Destination = "http://récepteur.test/x?y=1"
	empty := eff("res-π", 3, 1)
	empty.Payload = nil
	record(t, h, "res-π", 3, e, empty)
	got := pending(t, h, outbox.All, nil, 10)
	if len(got) != 2 {
		t.Fatalf("Pending: got %d effects, want 2", len(got))
	}
	g := got[0]
	if g.Resource != e.Resource || g.Token != e.Token || g.Seq != e.Seq || g.Destination != e.Destination || !bytes.Equal(g.Payload, e.Payload) {
		t.Fatalf("Pending: got %+v, want %+v", g, e)
	}
	if g.Key() != e.Key() {
		t.Fatalf("Key: got %s, want %s", g.Key(), e.Key())
	}
	if len(got[1].Payload) != 0 {
		t.Fatalf("empty payload: got %q, want none", got[1].Payload)
	}
}

// staleRecordsNothing: the effect exists only if its write landed.
// staleRecordsNothing: a write refused by a newer token records none of
// its effects. The control (with RecordUnfenced) writes the refused
// effect without the fence, and Pending then returns it.
func staleRecordsNothing(t *testing.T, h Harness) {
	newer, stale := eff("acct", 10, 0), eff("acct", 4, 0)
	record(t, h, "acct", 10, newer)
	err := h.Record(t.Context(), fence.Claim{Resource: "acct", Token: 4}, []outbox.Effect{stale})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Record with token 4 after 10: got %v, want an error matching fence.ErrStale", err)
	}
	wantPending(t, h, newer)
	if h.RecordUnfenced == nil {
		return
	}
	if err := h.RecordUnfenced(t.Context(), []outbox.Effect{stale}); err != nil {
		t.Fatalf("RecordUnfenced (control): got %v, want nil", err)
	}
	got := keys(pending(t, h, outbox.All, nil, 100))
	slices.Sort(got)
	if want := keys([]outbox.Effect{newer, stale}); !slices.Equal(got, want) {
		t.Fatalf("Pending after RecordUnfenced (control): got %q, want %q", got, want)
	}
}

func duplicate(t *testing.T, h Harness) {
	e := eff("acct", 5, 0)
	record(t, h, "acct", 5, e)
	err := h.Record(t.Context(), fence.Claim{Resource: "acct", Token: 5}, []outbox.Effect{e})
	if !errors.Is(err, outbox.ErrDuplicate) {
		t.Fatalf("recording %s again: got %v, want an error matching outbox.ErrDuplicate", e.Key(), err)
	}
	err = h.Record(t.Context(), fence.Claim{Resource: "acct", Token: 5}, []outbox.Effect{eff("acct", 5, 1), eff("acct", 5, 1)})
	if !errors.Is(err, outbox.ErrDuplicate) {
		t.Fatalf("one effect twice in one write: got %v, want an error matching outbox.ErrDuplicate", err)
	}
	wantPending(t, h, e)
}

func invalidEffect(t *testing.T, h Harness) {
	noDest := eff("acct", 5, 0)
	noDest.Destination = ""
	other := eff("other", 5, 0)
	oldTok := eff("acct", 4, 0)
	for _, c := range []struct {
		name string
		e    outbox.Effect
		want error
	}{
		{"no destination", noDest, outbox.ErrNoDestination},
		{"resource not claimed", other, fence.ErrInvalidArgument},
		{"token not the claim's", oldTok, fence.ErrInvalidArgument},
		{"negative seq", outbox.Effect{Resource: "acct", Token: 5, Seq: -1, Destination: "x"}, fence.ErrInvalidArgument},
	} {
		err := h.Record(t.Context(), fence.Claim{Resource: "acct", Token: 5}, []outbox.Effect{c.e})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want an error matching %v", c.name, err, c.want)
		}
	}
	wantPending(t, h)
}

func tooLarge(t *testing.T, h Harness) {
	if h.MaxPayload == 0 {
		e := eff("acct", 5, 0)
		e.Payload = bytes.Repeat([]byte("x"), 512<<10)
		record(t, h, "acct", 5, e)
		if got := pending(t, h, outbox.All, nil, 1); len(got) != 1 || len(got[0].Payload) != len(e.Payload) {
			t.Fatalf("a 512 KiB payload did not come back whole")
		}
		return
	}
	big := eff("acct", 5, 0)
	big.Payload = bytes.Repeat([]byte("x"), h.MaxPayload+1)
	err := h.Record(t.Context(), fence.Claim{Resource: "acct", Token: 5}, []outbox.Effect{big})
	if !errors.Is(err, outbox.ErrTooLarge) {
		t.Fatalf("payload of %d bytes: got %v, want an error matching outbox.ErrTooLarge", len(big.Payload), err)
	}
	fits := eff("acct", 5, 1)
	fits.Payload = bytes.Repeat([]byte("x"), h.MaxPayload)
	record(t, h, "acct", 5, fits)
	wantPending(t, h, fits)
}

func settleDelivered(t *testing.T, h Harness) {
	a, b, c := eff("acct", 5, 0), eff("acct", 5, 1), eff("other", 6, 0)
	record(t, h, "acct", 5, a, b)
	record(t, h, "other", 6, c)
	by := fence.Claim{Resource: "dispatcher", Token: 100}
	settle(t, h, by)
	settle(t, h, by, outbox.Settled{Effect: a, Attempts: 1}, outbox.Settled{Effect: c, Attempts: 2})
	wantPending(t, h, b)
}

func settleParked(t *testing.T, h Harness) {
	a, b := eff("acct", 5, 0), eff("acct", 5, 1)
	record(t, h, "acct", 5, a, b)
	by := fence.Claim{Resource: "dispatcher", Token: 100}
	settle(t, h, by, outbox.Settled{Effect: a, Parked: "receiver answered 400: no such user", Attempts: 3})
	wantPending(t, h, b)
	r, ok := h.Log.(outbox.Requeuer)
	if !ok {
		return
	}
	parked, err := r.Parked(t.Context(), outbox.All, 10)
	if err != nil || len(parked) != 1 {
		t.Fatalf("Parked: got %v, %v, want one effect", parked, err)
	}
	if p := parked[0]; p.Effect.Key() != a.Key() || p.Reason != "receiver answered 400: no such user" || p.Attempts != 3 || !bytes.Equal(p.Effect.Payload, a.Payload) {
		t.Fatalf("Parked: got %+v, want %s with its reason and 3 attempts", p, a.Key())
	}
	if err := r.Requeue(t.Context(), b); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Requeue of a pending effect: got %v, want an error matching fence.ErrNotFound", err)
	}
	if err := r.Requeue(t.Context(), a); err != nil {
		t.Fatalf("Requeue: got %v, want nil", err)
	}
	wantPending(t, h, a, b)
}

// settleStale: once a dispatcher with a newer token has settled (or taken
// over with an empty Settle), an older one marks nothing.
func settleStale(t *testing.T, h Harness) {
	a := eff("acct", 5, 0)
	record(t, h, "acct", 5, a)
	old, next := fence.Claim{Resource: "dispatcher", Token: 20}, fence.Claim{Resource: "dispatcher", Token: 30}
	settle(t, h, old)
	settle(t, h, next)
	err := h.Log.Settle(t.Context(), old, []outbox.Settled{{Effect: a, Attempts: 1}})
	var stale *fence.StaleError
	if !errors.As(err, &stale) || stale.Current != next.Token {
		t.Fatalf("Settle by token 20 after 30 took over: got %v, want a *fence.StaleError with Current 30", err)
	}
	err = h.Log.Settle(t.Context(), old, []outbox.Settled{{Effect: a, Parked: "late", Attempts: 1}})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("parking by token 20 after 30 took over: got %v, want an error matching fence.ErrStale", err)
	}
	wantPending(t, h, a)
	// Another dispatcher's resource has its own floor.
	settle(t, h, fence.Claim{Resource: "dispatcher-2", Token: 3})
	settle(t, h, next, outbox.Settled{Effect: a, Attempts: 1})
	wantPending(t, h)
}

func settleTwice(t *testing.T, h Harness) {
	a, b := eff("acct", 5, 0), eff("acct", 5, 1)
	record(t, h, "acct", 5, a, b)
	by := fence.Claim{Resource: "dispatcher", Token: 7}
	settle(t, h, by, outbox.Settled{Effect: a, Attempts: 1})
	settle(t, h, by, outbox.Settled{Effect: a, Attempts: 1}, outbox.Settled{Effect: eff("never", 1, 0), Attempts: 1})
	wantPending(t, h, b)
}

func scopeSkipLimit(t *testing.T, h Harness) {
	var all []outbox.Effect
	for i := range 12 {
		res := fmt.Sprintf("r%02d", i)
		e := eff(res, fence.Token(100+i), 0)
		record(t, h, res, e.Token, e)
		all = append(all, e)
	}
	var union []string
	for p := range 4 {
		s := outbox.Scope{Index: p, Partitions: 4}
		for _, e := range pending(t, h, s, nil, 100) {
			if !s.Has(e.Resource) {
				t.Errorf("Pending(%v) returned %s, which falls in partition %d", s, e.Resource, outbox.PartitionOf(e.Resource, 4))
			}
			union = append(union, keys([]outbox.Effect{e})...)
		}
	}
	slices.Sort(union)
	if w := keys(all); !slices.Equal(union, w) {
		t.Fatalf("the 4 partitions' Pending together: got %q, want %q", union, w)
	}
	got := keys(pending(t, h, outbox.All, []string{"r00", "r05"}, 100))
	want := keys(slices.Concat(all[1:5], all[6:]))
	if !slices.Equal(got, want) {
		t.Fatalf("Pending skipping r00 and r05: got %q, want %q", got, want)
	}
	if got := keys(pending(t, h, outbox.All, nil, 3)); !slices.Equal(got, keys(all[:3])) {
		t.Fatalf("Pending limit 3: got %q, want %q", got, keys(all[:3]))
	}
}

// watch: a watch wakes on an effect recorded after Watch returned, and its
// channel closes when its context ends.
func watch(t *testing.T, h Harness) {
	w, ok := h.Log.(outbox.Watcher)
	if !ok {
		t.Log("the log is not an outbox.Watcher: dispatchers poll it")
		return
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := w.Watch(ctx, outbox.All)
	if err != nil {
		t.Fatalf("Watch: got error %v, want nil", err)
	}
	drain(ch)
	record(t, h, "acct", 5, eff("acct", 5, 0))
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("Watch: channel closed, want a wake-up")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch: no wake-up within 5 s of a recorded effect")
	}
	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Watch: channel not closed within 5 s of its context's end")
		}
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
