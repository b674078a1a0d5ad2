package dynamofence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
)

// TestConformance: fencetest's cases; on a server without
// TransactWriteItems (dynamotest.NoTransactions), without UpdateAll's.
func TestConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return conformant(t, newStore(t)) })
}

// conformant is s for fencetest, its UpdateAll hidden on a server that
// lacks transactions (fencetest then says it has none to check).
func conformant(t *testing.T, s *dynamofence.Store) fence.Store {
	t.Helper()
	if srv := dynamotest.New(t); srv.Lacks(&dynamotest.NoTransactions) {
		t.Logf("%s (%s): %s", dynamotest.SkipMark, srv.Name(), dynamotest.NoTransactions.What)
		return struct {
			fence.Store
			fence.Updater
		}{s, s}
	}
	return s
}

// TestContention: many writers, each with a client of its own, on one key
// with values of 256 KiB (DynamoDB's items are limited to 400 KB).
func TestContention(t *testing.T) {
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return newStore(t) },
		fencetest.WithValueSize(256<<10), fencetest.WithWriters(8))
}
