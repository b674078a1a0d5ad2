package etcdfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/outbox"
)

// TestOutboxBadInput: every refusal before any write matches
// fence.ErrInvalidArgument (and the named error), writes nothing, and
// does not panic.
func TestOutboxBadInput(t *testing.T) {
	s, o := newOutbox(t, etcdfence.WithMaxEffectPayload(1000))
	ctx := t.Context()
	up := func(effects ...outbox.Effect) error {
		return o.Update(ctx, "k", 1, func(fence.Record) ([]byte, []outbox.Effect, error) { return []byte("x"), effects, nil })
	}
	many := make([]outbox.Effect, 64) // one over (MaxWriteOps - 1) / 2
	for i := range many {
		many[i] = effect("k", 1, int64(i))
	}
	big := effect("k", 1, 0)
	big.Payload = make([]byte, 1001)
	var nilOutbox *etcdfence.Outbox
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
		{"twice in one write", up(effect("k", 1, 0), effect("k", 1, 0)), outbox.ErrDuplicate},
		{"payload over the limit", up(big), outbox.ErrTooLarge},
		{"too many effects", up(many...), outbox.ErrTooLarge},
		{"UpdateAll nil fn", o.UpdateAll(ctx, []fence.Claim{{Resource: "k", Token: 1}}, nil), fence.ErrInvalidArgument},
		{"Pending limit 0", errOf(o.Pending(ctx, outbox.All, nil, 0)), fence.ErrInvalidArgument},
		{"Pending bad scope", errOf(o.Pending(ctx, outbox.Scope{Index: 2, Partitions: 2}, nil, 1)), fence.ErrInvalidArgument},
		{"Parked limit 0", errOf(o.Parked(ctx, outbox.All, 0)), fence.ErrInvalidArgument},
		{"Settle empty resource", o.Settle(ctx, fence.Claim{Token: 1}, nil), fence.ErrInvalidKey},
		{"Settle zero token", o.Settle(ctx, fence.Claim{Resource: "d"}, nil), fence.ErrInvalidToken},
		{"Requeue negative seq", o.Requeue(ctx, outbox.Effect{Resource: "k", Token: 1, Seq: -1}), fence.ErrInvalidArgument},
		{"Watch bad scope", errOf(o.Watch(ctx, outbox.Scope{Index: -1, Partitions: 1})), fence.ErrInvalidArgument},
		{"nil Outbox", nilOutbox.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, nil), fence.ErrInvalidArgument},
		{"NewOutbox nil store", errOf(etcdfence.NewOutbox(nil, "/x/")), fence.ErrInvalidArgument},
		{"NewOutbox empty prefix", errOf(etcdfence.NewOutbox(s, "")), fence.ErrInvalidArgument},
		{"NewOutbox prefix in data", errOf(etcdfence.NewOutbox(s, s.DataKey("x"))), fence.ErrInvalidArgument},
		{"NewOutbox nil option", errOf(etcdfence.NewOutbox(s, "/x/", nil)), etcdfence.ErrInvalidOption},
		{"NewOutbox payload 0", errOf(etcdfence.NewOutbox(s, "/x/", etcdfence.WithMaxEffectPayload(0))), etcdfence.ErrInvalidOption},
		{"NewOutbox nil watcher", errOf(etcdfence.NewOutbox(s, "/x/", etcdfence.WithWatcher(nil))), etcdfence.ErrInvalidOption},
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

// TestOutboxRequestTooLarge: effects within their payload limit whose
// write would exceed the Store's request limit are refused with both
// outbox.ErrTooLarge and ErrValueTooLarge, nothing written.
func TestOutboxRequestTooLarge(t *testing.T) {
	s := newStore(t, etcdfence.WithMaxRequestBytes(4096))
	o, err := etcdfence.NewOutbox(s, s.Prefix()+"outbox/")
	if err != nil {
		t.Fatal(err)
	}
	e := effect("k", 1, 0)
	e.Payload = []byte(strings.Repeat("p", 4096))
	err = record(o)(t.Context(), fence.Claim{Resource: "k", Token: 1}, []outbox.Effect{e})
	if !errors.Is(err, outbox.ErrTooLarge) || !errors.Is(err, etcdfence.ErrValueTooLarge) {
		t.Fatalf("Update: got %v, want ErrTooLarge and ErrValueTooLarge", err)
	}
	wantPending(t, o)
}

func errOf[T any](_ T, err error) error { return err }
