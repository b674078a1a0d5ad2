package dynamofence_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// accountsTable is a table of the application's own: a composite key
// (tenant, id), created once.
const accountsTable = "fencelock_test_accounts"

var accountsOnce sync.Once

// accounts returns the Table of accountsTable, created once and waited on
// until it is ACTIVE.
func accounts(t testing.TB, c *dynamodb.Client) *dynamofence.Table {
	t.Helper()
	accountsOnce.Do(func() {
		dynamotest.CreateTable(t, c, &dynamodb.CreateTableInput{
			TableName: aws.String(accountsTable),
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("tenant"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeN},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("tenant"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("id"), KeyType: types.KeyTypeRange},
			},
			BillingMode: types.BillingModePayPerRequest,
		})
	})
	tb, err := dynamofence.NewTable(c, accountsTable, "fence")
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func account(t testing.TB, id int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"tenant": &types.AttributeValueMemberS{Value: fencewant.Prefix(t)},
		"id":     &types.AttributeValueMemberN{Value: strconv.Itoa(id)},
	}
}

func setBalance(n int) expression.UpdateBuilder {
	return expression.Set(expression.Name("balance"), expression.Value(n))
}

func balance(t testing.TB, c *dynamodb.Client, key map[string]types.AttributeValue) (int, int) {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(accountsTable), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := out.Item["balance"].(*types.AttributeValueMemberN)
	f, _ := out.Item["fence"].(*types.AttributeValueMemberS) // 19 digits
	var bal, tok int
	if b != nil {
		bal, _ = strconv.Atoi(b.Value)
	}
	if f != nil {
		tok, _ = strconv.Atoi(f.Value)
	}
	return bal, tok
}

func TestTableUpdate(t *testing.T) {
	c := client(t)
	tb := accounts(t, c)
	k := account(t, 1)
	if err := tb.Update(t.Context(), k, 5, setBalance(100)); err != nil {
		t.Fatal(err)
	}
	fencewant.Stale(t, tb.Update(t.Context(), k, 4, setBalance(0)), 4, shown(t, 5))
	if b, tok := balance(t, c, k); b != 100 || tok != 5 {
		t.Fatalf("after a stale update: balance %d token %d, want 100 and 5", b, tok)
	}
	if err := tb.Update(t.Context(), k, 8, expression.Add(expression.Name("balance"), expression.Value(-30))); err != nil {
		t.Fatal(err)
	}
	if b, tok := balance(t, c, k); b != 70 || tok != 8 {
		t.Fatalf("balance %d token %d, want 70 and 8", b, tok)
	}
}

// The lost update a fenced read prevents, on an item of the user's own
// table; the control reads with a plain GetItem and loses it.
func TestTableReadClaims(t *testing.T) {
	c := client(t)
	tb := accounts(t, c)
	lost := func(read func(k map[string]types.AttributeValue) int) (final int, late, newer error) {
		k := account(t, 2)
		if err := tb.Update(t.Context(), k, 5, setBalance(100)); err != nil {
			t.Fatal(err)
		}
		read9 := read(k)
		late = tb.Update(t.Context(), k, 5, setBalance(200)) // a deposit of 100, late
		newer = tb.Update(t.Context(), k, 9, setBalance(read9-30))
		final, _ = balance(t, c, k)
		return final, late, newer
	}
	final, late, newer := lost(func(k map[string]types.AttributeValue) int { b, _ := balance(t, c, k); return b })
	if late != nil || newer != nil || final != 70 {
		t.Fatalf("control (plain GetItem): got %v, %v, balance %d; want both accepted and the deposit lost (70)", late, newer, final)
	}
	final, late, newer = lost(func(k map[string]types.AttributeValue) int {
		item, err := tb.GetForUpdate(t.Context(), k, 9)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(item["balance"].(*types.AttributeValueMemberN).Value)
		return n
	})
	fencewant.Stale(t, late, 5, shown(t, 9))
	if newer != nil || final != 70 {
		t.Fatalf("claimed: got %v, balance %d", newer, final)
	}
}

// A transfer between two accounts, each fenced by its own token, lands
// whole or not at all.
func TestTransact(t *testing.T) {
	needTransactions(t)
	c := client(t)
	tb := accounts(t, c)
	a, b := account(t, 3), account(t, 4)
	for _, k := range []map[string]types.AttributeValue{a, b} {
		if err := tb.Update(t.Context(), k, 5, setBalance(100)); err != nil {
			t.Fatal(err)
		}
	}
	transfer := func(ta, tb2 fence.Token, amount int) error {
		return dynamofence.Transact(t.Context(),
			dynamofence.TxWrite{Table: tb, Key: a, Token: ta, Update: expression.Add(expression.Name("balance"), expression.Value(-amount))},
			dynamofence.TxWrite{Table: tb, Key: b, Token: tb2, Update: expression.Add(expression.Name("balance"), expression.Value(amount))},
		)
	}
	if err := transfer(6, 7, 30); err != nil {
		t.Fatal(err)
	}
	if err := tb.Update(t.Context(), b, 9, setBalance(130)); err != nil { // a newer holder of b
		t.Fatal(err)
	}
	err := transfer(6, 7, 50)
	fencewant.Stale(t, err, 7, 9)
	ba, ta := balance(t, c, a)
	bb, _ := balance(t, c, b)
	if ba != 70 || ta != 6 || bb != 130 {
		t.Fatalf("after a refused transfer: a %d (token %d), b %d; want 70 (6) and 130: nothing of it written", ba, ta, bb)
	}
	if err := dynamofence.Transact(t.Context()); !errors.Is(err, dynamofence.ErrInvalidArgument) {
		t.Fatalf("Transact with no writes: got %v", err)
	}
	if err := dynamofence.Transact(t.Context(), dynamofence.TxWrite{Key: a, Token: 1}); !errors.Is(err, dynamofence.ErrInvalidArgument) {
		t.Fatalf("Transact with a nil Table: got %v", err)
	}
}
