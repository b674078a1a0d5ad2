package dynamofence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
)

// newClient returns a client of a DynamoDB-compatible server at endpoint
// (docs/dynamodb.md shows it). For AWS itself, build it from the
// environment instead:
//
//	cfg, err := config.LoadDefaultConfig(ctx) // github.com/aws/aws-sdk-go-v2/config
//	ddb := dynamodb.NewFromConfig(cfg)
func newClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint), // e.g. "http://localhost:8000"
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""), // any, for an emulator
		// minidyn's server sends a CRC32 header the SDK does not match: it
		// logs a warning on every reply. dynalite needs no such option.
		DisableValidateResponseChecksum: true,
	})
}

// Example writes a record with a fencing token, reads it back, and shows a
// paused holder's late write, with an older token, refused by DynamoDB.
func Example() {
	ctx := context.Background()
	ddb := newClient(dynamotest.Shared().URL()) // e.g. "http://localhost:8000"
	if err := dynamofence.CreateStoreTable(ctx, ddb, "fences", dynamofence.DefaultKeyAttribute); err != nil {
		log.Fatal(err)
	}
	store, err := dynamofence.New(ddb, "fences")
	if err != nil {
		log.Fatal(err)
	}

	// 34 is the token of the lock this process holds, e.g. lock.Token().
	if err := store.Put(ctx, "scheduler/state", 34, []byte(`{"leader": "b"}`)); err != nil {
		log.Fatal(err)
	}
	// The holder of token 33, paused until its lock was gone, writes late.
	err = store.Put(ctx, "scheduler/state", 33, []byte(`{"leader": "a"}`))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("token %d refused: DynamoDB holds %d\n", stale.Token, stale.Current)
	}
	rec, err := store.Get(ctx, "scheduler/state")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, token %d\n", rec.Value, rec.Token)
	// Output:
	// token 33 refused: DynamoDB holds 34
	// {"leader": "b"}, token 34
}

// transfer moves amount between two accounts, items of the application's
// own table keyed by "id", each under its own lock: from's holder has
// token fromToken, to's toToken. Both updates land, or neither: DynamoDB
// refuses the whole transaction if either account has seen a newer token.
func transfer(ctx context.Context, accounts *dynamofence.Table, from, to string, fromToken, toToken fence.Token, amount int) error {
	key := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
	}
	balance := expression.Name("balance")
	return dynamofence.Transact(ctx,
		dynamofence.TxWrite{Table: accounts, Key: key(from), Token: fromToken, Update: expression.Add(balance, expression.Value(-amount))},
		dynamofence.TxWrite{Table: accounts, Key: key(to), Token: toToken, Update: expression.Add(balance, expression.Value(amount))},
	)
}

// ExampleTransact moves 30 from account A to account B, then shows the
// late transfer of a holder of A's lock that was paused until a newer
// holder had written A: refused whole, B is not credited.
func ExampleTransact() {
	ctx := context.Background()
	ddb := newClient(dynamotest.Shared().URL())
	if err := dynamofence.CreateStoreTable(ctx, ddb, "accounts", "id"); err != nil { // any table with a key "id"
		log.Fatal(err)
	}
	accounts, err := dynamofence.NewTable(ddb, "accounts", "fence")
	if err != nil {
		log.Fatal(err)
	}
	if err := transfer(ctx, accounts, "A", "B", 41, 52, 30); err != nil {
		log.Fatal(err)
	}
	// A newer holder of A's lock (token 43) sets its balance.
	a := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "A"}}
	if err := accounts.Update(ctx, a, 43, expression.Set(expression.Name("balance"), expression.Value(500))); err != nil {
		log.Fatal(err)
	}
	// The holder of token 41, paused all along, transfers again.
	err = transfer(ctx, accounts, "A", "B", 41, 52, 30)
	fmt.Println("late transfer refused:", errors.Is(err, fence.ErrStale))

	for _, id := range []string{"A", "B"} {
		out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("accounts"), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		})
		if err != nil {
			log.Fatal(err)
		}
		n, _ := strconv.Atoi(out.Item["balance"].(*types.AttributeValueMemberN).Value)
		fmt.Println(id, n)
	}
	// Output:
	// late transfer refused: true
	// A 500
	// B 30
}
