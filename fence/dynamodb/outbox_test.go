package dynamofence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxtest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// outboxTable is the table every Outbox of the tests keeps its items in,
// each under a fresh prefix; created once.
const outboxTable = "fencelock_test_outbox"

var outboxOnce sync.Once

// newOutbox returns a Store on a table of its own (the suite's resources
// have fixed names) and its Outbox under a fresh prefix. It skips t on a
// server without transactions.
func newOutbox(t testing.TB, opts ...dynamofence.OutboxOption) (*dynamofence.Store, *dynamofence.Outbox) {
	t.Helper()
	needTransactions(t)
	c := client(t)
	var err error
	outboxOnce.Do(func() { err = dynamofence.CreateOutboxTable(t.Context(), c, outboxTable) })
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "fencelock_test_outbox_store_" + hex.EncodeToString(b[:])
	if err := dynamofence.CreateStoreTable(t.Context(), c, table, dynamofence.DefaultKeyAttribute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s, err := dynamofence.New(c, table)
	if err != nil {
		t.Fatal(err)
	}
	o, err := dynamofence.NewOutbox(s, outboxTable, append([]dynamofence.OutboxOption{dynamofence.WithOutboxPrefix(fencewant.Prefix(t))}, opts...)...)
	if err != nil {
		t.Fatalf("NewOutbox: got %v, want nil", err)
	}
	return s, o
}

// record is the harness's Record: one Outbox.Update writing "v".
func record(o *dynamofence.Outbox) func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
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

// recordUnfenced is the harness's RecordUnfenced: a plain PutItem of each
// effect's item, as Update would have written it.
func recordUnfenced(t testing.TB, o *dynamofence.Outbox) func(ctx context.Context, effects []outbox.Effect) error {
	c := client(t)
	return func(ctx context.Context, effects []outbox.Effect) error {
		for _, e := range effects {
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(outboxTable), Item: o.EffectItem(e)}); err != nil {
				return err
			}
		}
		return nil
	}
}

// The suite again with 4 shards: Pending merges them, and a scope of 4
// partitions (or 2) queries only its own.
func TestOutboxConformanceShards(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		_, o := newOutbox(t, dynamofence.WithOutboxShards(4))
		return outboxtest.Harness{Log: o, Record: record(o), RecordUnfenced: recordUnfenced(t, o), MaxPayload: o.MaxPayload()}
	})
}

// effect returns effect seq of token on resource, to "dst".
func effect(resource string, token int64, seq int64) outbox.Effect {
	return outbox.Effect{Resource: resource, Token: fence.Token(token), Seq: seq, Destination: "dst", Payload: []byte(fmt.Sprint(resource, token, seq))}
}

func wantPending(t testing.TB, o *dynamofence.Outbox, want ...outbox.Effect) {
	t.Helper()
	es, err := o.Pending(t.Context(), outbox.All, nil, 1000)
	if err != nil {
		t.Fatalf("Pending: got %v, want nil", err)
	}
	got, keys := make([]string, len(es)), make([]string, len(want))
	for i, e := range es {
		got[i] = e.Key()
	}
	for i, e := range want {
		keys[i] = e.Key()
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("Pending: got %v, want %v", got, keys)
	}
}

// TestOutboxStaleWriteRecordsNothing: a holder whose token was superseded
// between its read and its write records no effect, and its state does
// not land. Its control is the suite's StaleWriteRecordsNothing (the
// harness's RecordUnfenced): an item put without the fence is pending.
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

// TestOutboxSettleStale: a dispatcher whose token is below the one that
// settled last marks nothing, delivered or parked; the control, a
// dispatcher at the floor, marks.
func TestOutboxSettleStale(t *testing.T) {
	_, o := newOutbox(t)
	ctx := t.Context()
	e := effect("acct", 1, 0)
	if err := record(o)(ctx, fence.Claim{Resource: "acct", Token: 1}, []outbox.Effect{e}); err != nil {
		t.Fatal(err)
	}
	if err := o.Settle(ctx, fence.Claim{Resource: "dispatcher", Token: 5}, nil); err != nil {
		t.Fatalf("Settle(5, none): got %v, want nil", err)
	}
	for _, parked := range []string{"", "late"} {
		err := o.Settle(ctx, fence.Claim{Resource: "dispatcher", Token: 4}, []outbox.Settled{{Effect: e, Parked: parked, Attempts: 1}})
		var stale *fence.StaleError
		if !errors.As(err, &stale) || stale.Current != shown(t, 5) {
			t.Fatalf("Settle(4, parked %q): got %v, want a StaleError with Current %d", parked, err, shown(t, 5))
		}
		wantPending(t, o, e)
	}
	if err := o.Settle(ctx, fence.Claim{Resource: "dispatcher", Token: 5}, []outbox.Settled{{Effect: e, Attempts: 1}}); err != nil {
		t.Fatalf("Settle(5): got %v, want nil", err)
	}
	wantPending(t, o)
}
