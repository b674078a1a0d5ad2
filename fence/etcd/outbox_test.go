package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxtest"
)

// newOutbox returns a Store and its Outbox under a fresh prefix.
func newOutbox(t testing.TB, opts ...etcdfence.OutboxOption) (*etcdfence.Store, *etcdfence.Outbox) {
	t.Helper()
	s := newStore(t)
	o, err := etcdfence.NewOutbox(s, s.Prefix()+"outbox/", opts...)
	if err != nil {
		t.Fatalf("NewOutbox: got %v, want nil", err)
	}
	return s, o
}

// record is the harness's Record: one Outbox.Update writing "v".
func record(o *etcdfence.Outbox) func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
	return func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
		return o.Update(ctx, c.Resource, c.Token, func(fence.Record) ([]byte, []outbox.Effect, error) {
			return []byte("v"), effects, nil
		})
	}
}

func TestOutboxConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		_, o := newOutbox(t)
		return outboxtest.Harness{Log: o, Record: record(o), RecordUnfenced: recordUnfenced(t, o), MaxPayload: o.MaxPayload()}
	})
}

// recordUnfenced is the harness's RecordUnfenced: a plain put of each
// effect's key, as Update would have written it.
func recordUnfenced(t testing.TB, o *etcdfence.Outbox) func(ctx context.Context, effects []outbox.Effect) error {
	cli := etcdClient(t)
	return func(ctx context.Context, effects []outbox.Effect) error {
		for i, e := range effects {
			if _, err := cli.Put(ctx, o.EffectKey(e.Resource, e.Token, e.Seq), etcdfence.EncodeEffect(e, i)); err != nil {
				return err
			}
		}
		return nil
	}
}

// effect returns effect seq of token on resource, to "dst".
func effect(resource string, token int64, seq int64) outbox.Effect {
	return outbox.Effect{Resource: resource, Token: fence.Token(token), Seq: seq, Destination: "dst", Payload: []byte(fmt.Sprint(resource, token, seq))}
}

// pendingKeys returns the idempotency keys of everything pending.
func pendingKeys(t testing.TB, o *etcdfence.Outbox) []string {
	t.Helper()
	es, err := o.Pending(t.Context(), outbox.All, nil, 1000)
	if err != nil {
		t.Fatalf("Pending: got %v, want nil", err)
	}
	keys := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.Key()
	}
	return keys
}

func wantPending(t testing.TB, o *etcdfence.Outbox, want ...outbox.Effect) {
	t.Helper()
	keys := make([]string, len(want))
	for i, e := range want {
		keys[i] = e.Key()
	}
	if got := pendingKeys(t, o); !slices.Equal(got, keys) {
		t.Fatalf("Pending: got %v, want %v", got, keys)
	}
}

// TestOutboxStaleWriteRecordsNothing: a holder whose token was superseded
// between its read and its write records no effect, and its state does
// not land. Its control is the suite's StaleWriteRecordsNothing (the
// harness's RecordUnfenced): an effect put without the fence is pending.
func TestOutboxStaleWriteRecordsNothing(t *testing.T) {
	s, o := newOutbox(t)
	e := effect("acct", 1, 0)
	err := o.Update(t.Context(), "acct", 1, func(fence.Record) ([]byte, []outbox.Effect, error) {
		if _, err := s.GetForUpdate(t.Context(), "acct", 2); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("GetForUpdate(2): got %v, want ErrNotFound", err)
		}
		return []byte("stale"), []outbox.Effect{e}, nil
	})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update(1) after token 2 claimed: got %v, want ErrStale", err)
	}
	wantPending(t, o)
	if _, err := s.Get(t.Context(), "acct"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get: got %v, want ErrNotFound", err)
	}
}

// TestOutboxOrder: effects come back in the order of their writes, then
// of each write's slice, whatever their keys; UpdateAll's with them.
func TestOutboxOrder(t *testing.T) {
	_, o := newOutbox(t)
	ctx := t.Context()
	b1, a0 := effect("b", 3, 1), effect("b", 3, 0)
	if err := record(o)(ctx, fence.Claim{Resource: "b", Token: 3}, []outbox.Effect{b1, a0}); err != nil {
		t.Fatal(err)
	}
	x, y := effect("a", 7, 0), effect("b", 3, 2)
	err := o.UpdateAll(ctx, []fence.Claim{{Resource: "a", Token: 7}, {Resource: "b", Token: 3}},
		func(map[string]fence.Record) (map[string][]byte, []outbox.Effect, error) {
			return map[string][]byte{"a": []byte("A")}, []outbox.Effect{y, x}, nil
		})
	if err != nil {
		t.Fatalf("UpdateAll: got %v, want nil", err)
	}
	wantPending(t, o, b1, a0, y, x)
	got, err := o.Pending(ctx, outbox.All, []string{"b"}, 10)
	if err != nil || len(got) != 1 || got[0].Key() != x.Key() || string(got[0].Payload) != string(x.Payload) || got[0].Destination != "dst" {
		t.Fatalf("Pending skipping b: got %v, %v; want only %v", got, err, x)
	}
}

// TestOutboxStaleUpdateAllRecordsNothing: one stale claim of an UpdateAll
// refuses the whole write, effects on the other key too.
func TestOutboxStaleUpdateAllRecordsNothing(t *testing.T) {
	s, o := newOutbox(t)
	ctx := t.Context()
	err := o.UpdateAll(ctx, []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}},
		func(map[string]fence.Record) (map[string][]byte, []outbox.Effect, error) {
			mustPut(t, s, "b", 2, "newer")
			return map[string][]byte{"a": []byte("A")}, []outbox.Effect{effect("a", 1, 0), effect("b", 1, 0)}, nil
		})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("UpdateAll: got %v, want ErrStale", err)
	}
	wantPending(t, o)
}

// TestOutboxDuplicate: recording an effect twice is refused, and the
// second write changes nothing.
func TestOutboxDuplicate(t *testing.T) {
	s, o := newOutbox(t)
	ctx := t.Context()
	e := effect("acct", 1, 0)
	if err := record(o)(ctx, fence.Claim{Resource: "acct", Token: 1}, []outbox.Effect{e}); err != nil {
		t.Fatal(err)
	}
	err := o.Update(ctx, "acct", 1, func(fence.Record) ([]byte, []outbox.Effect, error) {
		return []byte("again"), []outbox.Effect{e}, nil
	})
	if !errors.Is(err, outbox.ErrDuplicate) {
		t.Fatalf("second Update: got %v, want ErrDuplicate", err)
	}
	wantRecord(t, s, "acct", 1, "v")
	wantPending(t, o, e)
}

// TestOutboxSettleMany: one Settle of more effects than etcd takes
// operations in one level of a transaction.
func TestOutboxSettleMany(t *testing.T) {
	_, o := newOutbox(t)
	ctx := t.Context()
	var done []outbox.Settled
	for r := range 5 {
		res := fmt.Sprint("r", r)
		var es []outbox.Effect
		for i := range 63 { // the most one write records (MaxWriteOps)
			es = append(es, effect(res, 1, int64(i)))
			done = append(done, outbox.Settled{Effect: es[i], Attempts: 1})
		}
		if err := record(o)(ctx, fence.Claim{Resource: res, Token: 1}, es); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(pendingKeys(t, o)); n != 315 {
		t.Fatalf("Pending: got %d, want 315", n)
	}
	if err := o.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, done); err != nil {
		t.Fatalf("Settle(315): got %v, want nil", err)
	}
	wantPending(t, o)
}
