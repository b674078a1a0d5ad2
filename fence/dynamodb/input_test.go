package dynamofence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// Bad input gets a clear error before any I/O, never a panic.
func TestBadInput(t *testing.T) {
	c := client(t)
	var nilClient *dynamodb.Client
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"New typed nil client", second(dynamofence.New(nilClient, "t")), fence.ErrInvalidArgument},
		{"New nil client", second(dynamofence.New(nil, "t")), dynamofence.ErrInvalidArgument},
		{"New empty table", second(dynamofence.New(c, "")), dynamofence.ErrInvalidArgument},
		{"New nil option", second(dynamofence.New(c, "t", nil)), dynamofence.ErrInvalidOption},
		{"New empty key attribute", second(dynamofence.New(c, "t", dynamofence.WithKeyAttribute(""))), dynamofence.ErrInvalidOption},
		{"New nil meter provider", second(dynamofence.New(c, "t", dynamofence.WithMeterProvider(nil))), dynamofence.ErrInvalidOption},
		{"NewTable typed nil client", second(dynamofence.NewTable(nilClient, "t", "fence")), dynamofence.ErrInvalidArgument},
		{"NewTable empty attribute", second(dynamofence.NewTable(c, "t", "")), dynamofence.ErrInvalidArgument},
		{"NewTable nil tracer provider", second(dynamofence.NewTable(c, "t", "f", dynamofence.WithTracerProvider(nil))), dynamofence.ErrInvalidOption},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	s := newStore(t)
	tb := accounts(t, c)
	k := account(t, 1)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	var zero dynamofence.Store
	var zeroTable dynamofence.Table
	up := setBalance(1)
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"Put empty key", s.Put(t.Context(), "", 1, nil), fence.ErrInvalidKey},
		{"Put token 0", s.Put(t.Context(), "k", 0, nil), fence.ErrInvalidToken},
		{"Put token -1", s.Put(t.Context(), "k", -1, nil), fence.ErrInvalidToken},
		{"Put nil ctx", s.Put(nilCtx, "k", 1, nil), dynamofence.ErrInvalidArgument},
		{"Put cancelled", s.Put(cancelled, "k", 1, nil), context.Canceled},
		{"Put zero Store", zero.Put(t.Context(), "k", 1, nil), dynamofence.ErrInvalidArgument},
		{"Delete token 0", s.Delete(t.Context(), "k", 0), fence.ErrInvalidToken},
		{"Get empty key", second(s.Get(t.Context(), "")), fence.ErrInvalidKey},
		{"GetForUpdate token 0", second(s.GetForUpdate(t.Context(), "k", 0)), fence.ErrInvalidToken},
		{"Update nil fn", s.Update(t.Context(), "k", 1, nil), fence.ErrInvalidArgument},
		{"Table.Update empty key", tb.Update(t.Context(), nil, 1, up), fence.ErrInvalidKey},
		{"Table.Update token 0", tb.Update(t.Context(), k, 0, up), fence.ErrInvalidToken},
		{"Table.Update the token attribute", tb.Update(t.Context(), k, 1, expression.Set(expression.Name("fence"), expression.Value(9))), dynamofence.ErrInvalidArgument},
		{"Table.Update a key with the token attribute", tb.Update(t.Context(), map[string]types.AttributeValue{"fence": &types.AttributeValueMemberN{Value: "1"}}, 1, up), fence.ErrInvalidKey},
		{"Table.Update nil ctx", tb.Update(nilCtx, k, 1, up), dynamofence.ErrInvalidArgument},
		{"Table.Update cancelled", tb.Update(cancelled, k, 1, up), context.Canceled},
		{"Table.Update zero Table", zeroTable.Update(t.Context(), k, 1, up), dynamofence.ErrInvalidArgument},
		{"Table.GetForUpdate token -1", second(tb.GetForUpdate(t.Context(), k, -1)), fence.ErrInvalidToken},
		{"Transact token 0", dynamofence.Transact(t.Context(), dynamofence.TxWrite{Table: tb, Key: k, Token: 0, Update: up}), fence.ErrInvalidToken},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	if b, tok := balance(t, c, k); b != 0 || tok != 0 {
		t.Fatalf("refused calls wrote: balance %d token %d", b, tok)
	}
}

func second[T any](_ T, err error) error { return err }

// A table that does not exist is a clear error that matches
// fence.ErrInvalidArgument, for every operation.
func TestNoTable(t *testing.T) {
	c := client(t)
	s, err := dynamofence.New(c, "fencelock_no_such_table")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := dynamofence.NewTable(c, "fencelock_no_such_table", "fence")
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "x"}}
	for name, err := range map[string]error{
		"Put":                s.Put(t.Context(), "k", 1, []byte("v")),
		"Get":                second(s.Get(t.Context(), "k")),
		"GetForUpdate":       second(s.GetForUpdate(t.Context(), "k", 1)),
		"Update":             s.Update(t.Context(), "k", 1, func(fence.Record) ([]byte, error) { return nil, nil }),
		"Table.Update":       tb.Update(t.Context(), k, 1, setBalance(1)),
		"Table.GetForUpdate": second(tb.GetForUpdate(t.Context(), k, 1)),
	} {
		if !errors.Is(err, dynamofence.ErrNoTable) || !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("%s on a table that does not exist: got %v, want ErrNoTable", name, err)
		}
	}
}

// An item this package did not write is reported, and left alone.
func TestCorrupt(t *testing.T) {
	c := client(t)
	s := mustNew(t, c)
	k := fencewant.Prefix(t) + "k"
	_, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"key": &types.AttributeValueMemberS{Value: k}, "fence_token": &types.AttributeValueMemberS{Value: "x"},
		"fence_value": &types.AttributeValueMemberS{Value: "not binary"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), k); !errors.Is(err, dynamofence.ErrCorrupt) {
		t.Fatalf("Get of an item with a string value: got %v, want ErrCorrupt", err)
	}
	if _, err := s.GetForUpdate(t.Context(), k, 3); !errors.Is(err, dynamofence.ErrCorrupt) {
		t.Fatalf("GetForUpdate of it: got %v, want ErrCorrupt", err)
	}
}

// Delete keeps the floor: the record is gone, a stale write is refused.
func TestDelete(t *testing.T) {
	s := newStore(t)
	k := fencewant.Prefix(t) + "k"
	fencewant.Put(t, s, k, 5, "a")
	if err := s.Delete(t.Context(), k, 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Delete(4) after 5: got %v", err)
	}
	if err := s.Delete(t.Context(), k, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), k); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if err := s.Put(t.Context(), k, 5, []byte("late")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(5) after Delete(6): got %v, want ErrStale", err)
	}
	fencewant.Put(t, s, k, 6, "b")
	fencewant.Record(t, s, k, 6, "b")
}
