package dynamofence_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// Every write is counted by operation and outcome and traced as a child of
// the caller's span, with its token and key.
func TestTelemetry(t *testing.T) {
	needTransactions(t)
	otel := oteltest.New(t)
	opts := []dynamofence.Option{dynamofence.WithMeterProvider(otel.Meters), dynamofence.WithTracerProvider(otel.Tracers)}
	c := client(t)
	s := mustNew(t, c, opts...)
	accounts(t, c) // the table
	tb, err := dynamofence.NewTable(c, accountsTable, "fence", opts...)
	if err != nil {
		t.Fatal(err)
	}
	parent := otel.StoreWrites(t, s, fencewant.Prefix(t))
	a, b := account(t, 1), account(t, 2)
	if err := tb.Update(t.Context(), a, 5, setBalance(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.GetForUpdate(t.Context(), a, 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Table.GetForUpdate(4) after 5: got %v", err)
	}
	if err := dynamofence.Transact(t.Context(),
		dynamofence.TxWrite{Table: tb, Key: a, Token: 5, Update: expression.Add(expression.Name("balance"), expression.Value(-1))},
		dynamofence.TxWrite{Table: tb, Key: b, Token: 6, Update: expression.Add(expression.Name("balance"), expression.Value(1))},
	); err != nil {
		t.Fatal(err)
	}
	otel.WantWrites(t, "dynamodb", append(oteltest.StoreWrites,
		oteltest.Write{Op: "table_update", Outcome: "accepted"},
		oteltest.Write{Op: "table_get_for_update", Outcome: "stale"},
		oteltest.Write{Op: "transact", Outcome: "accepted"})...)
	otel.WantPutSpan(t, "dynamodb", parent)
}
