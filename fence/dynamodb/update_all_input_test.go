package dynamofence_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// countingClient counts the requests it is given and sends none.
type countingClient struct{ n atomic.Int64 }

var errNotSent = errors.New("countingClient: not sent")

func (c *countingClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n.Add(1)
	return nil, errNotSent
}

func (c *countingClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return nil, errNotSent
}

func (c *countingClient) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.n.Add(1)
	return nil, errNotSent
}

type nilClaimer struct{}

func (*nilClaimer) Claims() []fence.Claim { return nil }

// UpdateAll's bad input is refused before any I/O.
func TestUpdateAllBadInput(t *testing.T) {
	var c countingClient
	s := mustNew(t, &c)
	fn := move("a", "b", 1, nil)
	var many []fence.Claim
	for i := range dynamofence.MaxTxWrites + 1 {
		many = append(many, fence.Claim{Resource: strconv.Itoa(i), Token: 1})
	}
	var zero dynamofence.Store
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"no claims", s.UpdateAll(t.Context(), nil, fn)},
		{"one key, two tokens", s.UpdateAll(t.Context(), []fence.Claim{{Resource: "a", Token: 1}, {Resource: "a", Token: 2}}, fn)},
		{"zero token", s.UpdateAll(t.Context(), both("a", "b", 0), fn)},
		{"nil function", s.UpdateAll(t.Context(), both("a", "b", 1), nil)},
		{"more than MaxTxWrites", s.UpdateAll(t.Context(), many, fn)},
		{"nil holder", s.UpdateHeld(t.Context(), nil, fn)},
		{"typed nil holder", s.UpdateHeld(t.Context(), (*nilClaimer)(nil), fn)},
		{"zero Store", zero.UpdateAll(t.Context(), both("a", "b", 1), fn)},
	} {
		if !errors.Is(tt.err, fence.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error matching fence.ErrInvalidArgument", tt.name, tt.err)
		}
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("requests sent for bad input: got %d, want 0", n)
	}
}

// UpdateAll works at its documented limit, MaxTxWrites keys (DynamoDB's
// 100 actions a transaction; BatchGetItem's 100 keys), at the first touch
// (every key claimed with its own UpdateItem) and the second (one
// BatchGetItem).
func TestUpdateAllAtMaxKeys(t *testing.T) {
	needTransactions(t)
	s := newStore(t)
	p := fencewant.Prefix(t)
	var claims []fence.Claim
	for i := range dynamofence.MaxTxWrites {
		claims = append(claims, fence.Claim{Resource: p + strconv.Itoa(i), Token: 3})
	}
	all := func(v string) fence.UpdateAllFunc {
		return func(old map[string]fence.Record) (map[string][]byte, error) {
			next := make(map[string][]byte, len(old))
			for k := range old {
				next[k] = []byte(v)
			}
			return next, nil
		}
	}
	for _, v := range []string{"first", "second"} {
		if err := s.UpdateAll(t.Context(), claims, all(v)); err != nil {
			t.Fatalf("UpdateAll of MaxTxWrites (%d) keys, %s touch: %v", dynamofence.MaxTxWrites, v, err)
		}
		fencewant.Record(t, s, claims[len(claims)-1].Resource, 3, v)
	}
}
