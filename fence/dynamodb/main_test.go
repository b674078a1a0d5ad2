package dynamofence_test

import (
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
)

// TestMain starts the DynamoDB-compatible server every test shares.
func TestMain(m *testing.M) { goleak.VerifyTestMain(dynamotest.Main(m)) }

// storeTable is the table every Store of the tests writes (keys are fresh
// per test), created once.
const storeTable = "fencelock_test_store"

var tableOnce sync.Once

// client returns a client of the shared server with the SDK's default
// retries.
func client(t testing.TB, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	c := dynamotest.New(t).Client(t, opts...)
	var err error
	tableOnce.Do(func() {
		err = dynamofence.CreateStoreTable(t.Context(), c, storeTable, dynamofence.DefaultKeyAttribute)
		if err == nil {
			err = mustNew(t, c).CheckConditions(t.Context()) // the server must honour conditions, or nothing here means anything
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustNew(t testing.TB, c dynamofence.Client, opts ...dynamofence.Option) *dynamofence.Store {
	t.Helper()
	s, err := dynamofence.New(c, storeTable, opts...)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return s
}

func newStore(t testing.TB, opts ...dynamofence.Option) *dynamofence.Store {
	t.Helper()
	return mustNew(t, client(t), opts...)
}

// shown is the floor a refusal reports as the StaleError's Current: f, or
// 0 on a server that returns no item with a failed condition
// (dynamotest.NoItemOnConditionFailure).
func shown(t testing.TB, f fence.Token) fence.Token {
	t.Helper()
	if dynamotest.New(t).Lacks(&dynamotest.NoItemOnConditionFailure) {
		return 0
	}
	return f
}

// needTransactions skips t on a server without TransactWriteItems
// (dynamotest.NoTransactions), saying so.
func needTransactions(t testing.TB) {
	t.Helper()
	dynamotest.New(t).Need(t, &dynamotest.NoTransactions)
}
