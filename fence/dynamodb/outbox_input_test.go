package dynamofence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/outbox"
)

// TestOutboxBadInput: every refusal before any write matches
// fence.ErrInvalidArgument (and the named error), writes nothing, and
// does not panic.
func TestOutboxBadInput(t *testing.T) {
	s, o := newOutbox(t, dynamofence.WithMaxEffectPayload(1000))
	ctx := t.Context()
	up := func(effects ...outbox.Effect) error {
		return o.Update(ctx, "k", 1, func(fence.Record) ([]byte, []outbox.Effect, error) { return []byte("x"), effects, nil })
	}
	many := make([]outbox.Effect, dynamofence.MaxTxWrites)
	for i := range many {
		many[i] = effect("k", 1, int64(i))
	}
	big := effect("k", 1, 0)
	big.Payload = make([]byte, 1001)
	var nilOutbox *dynamofence.Outbox
	bare, err := dynamofence.New(narrow{client(t)}, s.Table())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nil fn", o.Update(ctx, "k", 1, nil), fence.ErrInvalidArgument},
		{"empty key", o.Update(ctx, "", 1, func(fence.Record) ([]byte, []outbox.Effect, error) { return nil, nil, nil }), fence.ErrInvalidKey},
		{"zero token", o.Update(ctx, "k", 0, func(fence.Record) ([]byte, []outbox.Effect, error) { return nil, nil, nil }), fence.ErrInvalidToken},
		{"effect of another resource", up(effect("other", 1, 0)), fence.ErrInvalidArgument},
		{"effect of another token", up(effect("k", 2, 0)), fence.ErrInvalidArgument},
		{"no destination", up(outbox.Effect{Resource: "k", Token: 1}), outbox.ErrNoDestination},
		{"negative seq", up(outbox.Effect{Resource: "k", Token: 1, Seq: -1, Destination: "d"}), fence.ErrInvalidArgument},
		{"twice in one write", up(effect("k", 1, 0), effect("k", 1, 0)), outbox.ErrDuplicate},
		{"payload over the limit", up(big), outbox.ErrTooLarge},
		{"more items than a transaction", up(many...), outbox.ErrTooLarge},
		{"UpdateAll nil fn", o.UpdateAll(ctx, []fence.Claim{{Resource: "k", Token: 1}}, nil), fence.ErrInvalidArgument},
		{"UpdateAll no claims", o.UpdateAll(ctx, nil, func(map[string]fence.Record) (map[string][]byte, []outbox.Effect, error) { return nil, nil, nil }), fence.ErrInvalidArgument},
		{"Pending limit 0", errOf(o.Pending(ctx, outbox.All, nil, 0)), fence.ErrInvalidArgument},
		{"Pending bad scope", errOf(o.Pending(ctx, outbox.Scope{Index: 2, Partitions: 2}, nil, 1)), fence.ErrInvalidArgument},
		{"Parked limit 0", errOf(o.Parked(ctx, outbox.All, 0)), fence.ErrInvalidArgument},
		{"Settle empty resource", o.Settle(ctx, fence.Claim{Token: 1}, nil), fence.ErrInvalidKey},
		{"Settle zero token", o.Settle(ctx, fence.Claim{Resource: "d"}, nil), fence.ErrInvalidToken},
		{"Requeue negative seq", o.Requeue(ctx, outbox.Effect{Resource: "k", Token: 1, Seq: -1}), fence.ErrInvalidArgument},
		{"Requeue empty resource", o.Requeue(ctx, outbox.Effect{Token: 1}), fence.ErrInvalidKey},
		{"nil Outbox", nilOutbox.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, nil), fence.ErrInvalidArgument},
		{"nil Outbox Pending", errOf(nilOutbox.Pending(ctx, outbox.All, nil, 1)), fence.ErrInvalidArgument},
		{"NewOutbox nil store", errOf(dynamofence.NewOutbox(nil, "t")), fence.ErrInvalidArgument},
		{"NewOutbox empty table", errOf(dynamofence.NewOutbox(s, "")), fence.ErrInvalidArgument},
		{"NewOutbox client without Query", errOf(dynamofence.NewOutbox(bare, "t")), fence.ErrInvalidArgument},
		{"NewOutbox nil option", errOf(dynamofence.NewOutbox(s, "t", nil)), dynamofence.ErrInvalidOption},
		{"NewOutbox payload 0", errOf(dynamofence.NewOutbox(s, "t", dynamofence.WithMaxEffectPayload(0))), dynamofence.ErrInvalidOption},
		{"NewOutbox payload over an item", errOf(dynamofence.NewOutbox(s, "t", dynamofence.WithMaxEffectPayload(dynamofence.MaxEffectPayload+1))), dynamofence.ErrInvalidOption},
		{"NewOutbox shards 0", errOf(dynamofence.NewOutbox(s, "t", dynamofence.WithOutboxShards(0))), dynamofence.ErrInvalidOption},
		{"NewOutbox long prefix", errOf(dynamofence.NewOutbox(s, "t", dynamofence.WithOutboxPrefix(string(make([]byte, dynamofence.MaxOutboxPrefix+1))))), dynamofence.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) || !errors.Is(tt.err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want %v (and fence.ErrInvalidArgument)", tt.err, tt.want)
			}
		})
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after the refusals: got %v, want ErrNotFound", err)
	}
	wantPending(t, o)
}

// TestOutboxTooLarge: effects within their payload limit that make a
// transaction over DynamoDB's 4 MB are refused with outbox.ErrTooLarge
// before anything is sent; the control, one effect fewer, lands whole.
func TestOutboxTooLarge(t *testing.T) {
	_, o := newOutbox(t)
	var effects []outbox.Effect
	for i := range 11 {
		e := effect("k", 1, int64(i))
		e.Payload = make([]byte, o.MaxPayload())
		effects = append(effects, e)
	}
	err := record(o)(t.Context(), fence.Claim{Resource: "k", Token: 1}, effects)
	if !errors.Is(err, outbox.ErrTooLarge) {
		t.Fatalf("11 effects of %d bytes: got %v, want outbox.ErrTooLarge", o.MaxPayload(), err)
	}
	wantPending(t, o)
	if err := record(o)(t.Context(), fence.Claim{Resource: "k", Token: 1}, effects[:10]); err != nil {
		t.Fatalf("10 effects of %d bytes: got %v, want nil", o.MaxPayload(), err)
	}
	got, err := o.Pending(t.Context(), outbox.All, nil, 100)
	if err != nil || len(got) != 10 || len(got[9].Payload) != o.MaxPayload() {
		t.Fatalf("Pending: got %d effects, %v; want 10 whole", len(got), err)
	}
}

func errOf[T any](_ T, err error) error { return err }
