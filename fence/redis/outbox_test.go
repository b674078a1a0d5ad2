package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxtest"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// newOutbox returns a Store and its Outbox under one fresh hash tag.
func newOutbox(t testing.TB, opts ...redisfence.OutboxOption) (*redisfence.Store, *redisfence.Outbox) {
	t.Helper()
	tag := "{" + prefix(t) + "}:"
	s := mustNew(t, client(t), tag+"rec:")
	o, err := redisfence.NewOutbox(s, tag+"outbox:", opts...)
	if err != nil {
		t.Fatalf("NewOutbox: got %v, want nil", err)
	}
	return s, o
}

// record is the harness's Record: one Outbox.Update writing "v".
func record(o *redisfence.Outbox) func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
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

// recordUnfenced is the harness's RecordUnfenced: each effect written by
// plain commands, its key in the pending set and its value in the
// effects hash, as the recording script would have.
func recordUnfenced(t testing.TB, o *redisfence.Outbox) func(ctx context.Context, effects []outbox.Effect) error {
	c := client(t)
	return func(ctx context.Context, effects []outbox.Effect) error {
		for i, e := range effects {
			if err := c.ZAdd(ctx, o.Prefix()+"pending", redis.Z{Score: 1 << 40, Member: e.Key()}).Err(); err != nil {
				return err
			}
			if err := c.HSet(ctx, o.Prefix()+"effects", e.Key(), redisfence.EncodeEffect(e, i)).Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

func effect(resource string, token fence.Token, seq int64) outbox.Effect {
	return outbox.Effect{Resource: resource, Token: token, Seq: seq, Destination: "dst", Payload: []byte(fmt.Sprint(resource, token, seq))}
}

func wantPending(t testing.TB, o *redisfence.Outbox, want ...outbox.Effect) {
	t.Helper()
	es, err := o.Pending(t.Context(), outbox.All, nil, 1000)
	if err != nil {
		t.Fatalf("Pending: got %v, want nil", err)
	}
	var got, keys []string
	for _, e := range es {
		got = append(got, e.Key())
	}
	for _, e := range want {
		keys = append(keys, e.Key())
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("Pending: got %v, want %v", got, keys)
	}
}

// TestOutboxStaleWriteRecordsNothing: a holder superseded between its
// read and its write records no effect. Its control is the suite's
// StaleWriteRecordsNothing (the harness's RecordUnfenced): an effect
// written by plain commands is pending.
func TestOutboxStaleWriteRecordsNothing(t *testing.T) {
	s, o := newOutbox(t)
	e := effect("acct", 1, 0)
	err := o.Update(t.Context(), "acct", 1, func(fence.Record) ([]byte, []outbox.Effect, error) {
		mustPut(t, s, "acct", 2, "newer")
		return []byte("stale"), []outbox.Effect{e}, nil
	})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update(1) after token 2 wrote: got %v, want ErrStale", err)
	}
	fencewant.Record(t, s, "acct", 2, "newer")
	wantPending(t, o)
}

// TestOutboxOrderAndPages: more effects than a page, across writes and
// UpdateAll, come back in recording order; a parked one keeps its place
// when requeued.
func TestOutboxOrderAndPages(t *testing.T) {
	_, o := newOutbox(t)
	ctx := t.Context()
	var want []outbox.Effect
	for w := range 3 {
		var es []outbox.Effect
		for i := range 100 {
			es = append(es, effect("r", 1, int64(w*100+99-i))) // seqs falling within a write
		}
		if err := record(o)(ctx, fence.Claim{Resource: "r", Token: 1}, es); err != nil {
			t.Fatal(err)
		}
		want = append(want, es...)
	}
	x, y := effect("a", 2, 0), effect("r", 1, 1000)
	err := o.UpdateAll(ctx, []fence.Claim{{Resource: "a", Token: 2}, {Resource: "r", Token: 1}},
		func(map[string]fence.Record) (map[string][]byte, []outbox.Effect, error) {
			return map[string][]byte{"a": []byte("A")}, []outbox.Effect{y, x}, nil
		})
	if err != nil {
		t.Fatalf("UpdateAll: got %v, want nil", err)
	}
	want = append(want, y, x)
	wantPending(t, o, want...)
	by := fence.Claim{Resource: "d", Token: 1}
	if err := o.Settle(ctx, by, []outbox.Settled{{Effect: want[1], Parked: "410", Attempts: 2}}); err != nil {
		t.Fatal(err)
	}
	wantPending(t, o, slices.Delete(slices.Clone(want), 1, 2)...)
	if err := o.Requeue(ctx, want[0]); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Requeue(pending): got %v, want ErrNotFound", err)
	}
	if err := o.Requeue(ctx, want[1]); err != nil {
		t.Fatalf("Requeue: got %v, want nil", err)
	}
	wantPending(t, o, want...)
}

// TestOutboxBadInput: refusals before the write match
// fence.ErrInvalidArgument and the named error, and write nothing.
func TestOutboxBadInput(t *testing.T) {
	s, o := newOutbox(t, redisfence.WithMaxEffectPayload(10))
	ctx := t.Context()
	up := func(effects ...outbox.Effect) error {
		return o.Update(ctx, "k", 1, func(fence.Record) ([]byte, []outbox.Effect, error) { return []byte("x"), effects, nil })
	}
	big := effect("k", 1, 0)
	big.Payload = make([]byte, 11)
	untagged := mustNew(t, client(t), prefix(t))
	apart, err := redisfence.NewOutbox(untagged, "{"+prefix(t)+"}:outbox:")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nil fn", o.Update(ctx, "k", 1, nil), fence.ErrInvalidArgument},
		{"zero token", o.Update(ctx, "k", 0, func(fence.Record) ([]byte, []outbox.Effect, error) { return nil, nil, nil }), fence.ErrInvalidToken},
		{"effect of another key", up(effect("other", 1, 0)), fence.ErrInvalidArgument},
		{"no destination", up(outbox.Effect{Resource: "k", Token: 1}), outbox.ErrNoDestination},
		{"twice in one write", up(effect("k", 1, 0), effect("k", 1, 0)), outbox.ErrDuplicate},
		{"payload over the limit", up(big), outbox.ErrTooLarge},
		{"key of another slot", apart.Update(ctx, "k", 1, func(fence.Record) ([]byte, []outbox.Effect, error) { return nil, nil, nil }), redisfence.ErrCrossSlot},
		{"Pending limit 0", errOf(o.Pending(ctx, outbox.All, nil, 0)), fence.ErrInvalidArgument},
		{"Parked bad scope", errOf(o.Parked(ctx, outbox.Scope{Index: 3, Partitions: 2}, 1)), fence.ErrInvalidArgument},
		{"Settle zero token", o.Settle(ctx, fence.Claim{Resource: "d"}, nil), fence.ErrInvalidToken},
		{"Requeue negative seq", o.Requeue(ctx, outbox.Effect{Resource: "k", Token: 1, Seq: -1}), fence.ErrInvalidArgument},
		{"NewOutbox nil store", errOf(redisfence.NewOutbox(nil, "{x}:")), fence.ErrInvalidArgument},
		{"NewOutbox empty prefix", errOf(redisfence.NewOutbox(s, "")), fence.ErrInvalidArgument},
		{"NewOutbox untagged prefix", errOf(redisfence.NewOutbox(untagged, "outbox:")), redisfence.ErrCrossSlot},
		{"NewOutbox nil option", errOf(redisfence.NewOutbox(s, "{x}:", nil)), redisfence.ErrInvalidOption},
		{"NewOutbox payload 0", errOf(redisfence.NewOutbox(s, "{x}:", redisfence.WithMaxEffectPayload(0))), redisfence.ErrInvalidOption},
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

func errOf[T any](_ T, err error) error { return err }
