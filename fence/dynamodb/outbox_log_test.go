package dynamofence_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// TestOutboxUpdateAll: UpdateAll's effects come in the order of its
// slice, after those of earlier writes, whatever their keys; a stale
// claim among its keys records none of them.
func TestOutboxUpdateAll(t *testing.T) {
	s, o := newOutbox(t)
	ctx := t.Context()
	b1, b0 := effect("b", 3, 1), effect("b", 3, 0)
	if err := record(o)(ctx, fence.Claim{Resource: "b", Token: 3}, []outbox.Effect{b1, b0}); err != nil {
		t.Fatal(err)
	}
	x, y := effect("a", 7, 0), effect("b", 3, 2)
	all := func(claims []fence.Claim, effects ...outbox.Effect) error {
		return o.UpdateAll(ctx, claims, func(map[string]fence.Record) (map[string][]byte, []outbox.Effect, error) {
			return map[string][]byte{"a": []byte("A")}, effects, nil
		})
	}
	if err := all([]fence.Claim{{Resource: "a", Token: 7}, {Resource: "b", Token: 3}}, y, x); err != nil {
		t.Fatalf("UpdateAll: got %v, want nil", err)
	}
	wantPending(t, o, b1, b0, y, x)
	fencewant.Record(t, s, "a", 7, "A")
	if _, err := s.GetForUpdate(ctx, "b", 4); err != nil {
		t.Fatal(err)
	}
	err := all([]fence.Claim{{Resource: "a", Token: 7}, {Resource: "b", Token: 3}}, effect("a", 7, 1), effect("b", 3, 3))
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("UpdateAll with b's token superseded: got %v, want ErrStale", err)
	}
	wantPending(t, o, b1, b0, y, x)
}

// TestOutboxOrderPerResourceNotClock: a write's position is one past the
// last of the records it claims when the clock is behind it (a writer
// whose clock lags), so a resource's effects stay in order. Resource a's
// last position is set an hour ahead: its next effect, x, comes after
// b's, recorded later by the clock, and a's following one, z, after x.
// Were positions the clock's alone, the order would be x, y, z.
func TestOutboxOrderPerResourceNotClock(t *testing.T) {
	s, o := newOutbox(t)
	ctx := t.Context()
	ahead := time.Now().Add(time.Hour).UnixMicro()
	_, err := client(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{dynamofence.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: "a"}},
		UpdateExpression:          aws.String("SET fence_outbox_pos = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberN{Value: strconv.FormatInt(ahead, 10)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	x, y, z := effect("a", 1, 0), effect("b", 1, 0), effect("a", 1, 1)
	for _, e := range []outbox.Effect{x, y, z} {
		if err := record(o)(ctx, fence.Claim{Resource: e.Resource, Token: 1}, []outbox.Effect{e}); err != nil {
			t.Fatal(err)
		}
	}
	wantPending(t, o, y, x, z)
}

// TestOutboxParkAndRequeue: a parked effect leaves Pending without
// holding back its resource's later effects, is listed by Parked with its
// reason, and comes back at its place; parking an effect no longer
// recorded passes it over and marks the rest.
func TestOutboxParkAndRequeue(t *testing.T) {
	_, o := newOutbox(t)
	ctx := t.Context()
	a, b, c := effect("k", 1, 0), effect("k", 1, 1), effect("k", 1, 2)
	if err := record(o)(ctx, fence.Claim{Resource: "k", Token: 1}, []outbox.Effect{a, b, c}); err != nil {
		t.Fatal(err)
	}
	by := fence.Claim{Resource: "d", Token: 1}
	gone := effect("gone", 1, 0)
	err := o.Settle(ctx, by, []outbox.Settled{{Effect: gone, Parked: "x", Attempts: 1}, {Effect: a, Parked: "no such user", Attempts: 3}, {Effect: b, Attempts: 1}})
	if err != nil {
		t.Fatalf("Settle: got %v, want nil", err)
	}
	wantPending(t, o, c)
	parked, err := o.Parked(ctx, outbox.All, 10)
	if err != nil || len(parked) != 1 || parked[0].Effect.Key() != a.Key() || parked[0].Reason != "no such user" || parked[0].Attempts != 3 {
		t.Fatalf("Parked: got %+v, %v; want %s, \"no such user\", 3 attempts", parked, err, a.Key())
	}
	for _, e := range []outbox.Effect{b, c, gone} {
		if err := o.Requeue(ctx, e); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Requeue(%s), not parked: got %v, want ErrNotFound", e.Key(), err)
		}
	}
	if err := o.Requeue(ctx, a); err != nil {
		t.Fatalf("Requeue: got %v, want nil", err)
	}
	wantPending(t, o, a, c)
	if err := o.Requeue(ctx, a); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Requeue twice: got %v, want ErrNotFound", err)
	}
}

// TestOutboxSettleMany: more effects than one transaction holds are
// settled in several, each fenced: all marked by the dispatcher at the
// floor; none by a deposed one (its first transaction is refused, and
// Settle stops there).
func TestOutboxSettleMany(t *testing.T) {
	_, o := newOutbox(t)
	ctx := t.Context()
	done := recordMany(t, o)
	if err := o.Settle(ctx, fence.Claim{Resource: "d", Token: 9}, nil); err != nil {
		t.Fatal(err)
	}
	if err := o.Settle(ctx, fence.Claim{Resource: "d", Token: 8}, done); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Settle of 250 by a deposed dispatcher: got %v, want ErrStale", err)
	}
	if got, err := o.Pending(ctx, outbox.All, nil, 1000); err != nil || len(got) != 250 {
		t.Fatalf("Pending: got %d, %v; want 250", len(got), err)
	}
	if err := o.Settle(ctx, fence.Claim{Resource: "d", Token: 9}, done); err != nil {
		t.Fatalf("Settle of 250: got %v, want nil", err)
	}
	wantPending(t, o)
}

// recordMany records 250 effects on 3 resources in 25 writes, and returns
// them in recording order, delivered.
func recordMany(t *testing.T, o *dynamofence.Outbox) []outbox.Settled {
	t.Helper()
	var done []outbox.Settled
	for w := range 25 {
		var effects []outbox.Effect
		res := "k" + strconv.Itoa(w%3)
		for i := range 10 {
			effects = append(effects, effect(res, 1, int64(10*w+i)))
			done = append(done, outbox.Settled{Effect: effects[i], Attempts: 1})
		}
		if err := record(o)(t.Context(), fence.Claim{Resource: res, Token: 1}, effects); err != nil {
			t.Fatal(err)
		}
	}
	return done
}
