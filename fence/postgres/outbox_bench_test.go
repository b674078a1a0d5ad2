package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
)

// BenchmarkOutboxRecord: the same fenced transaction (RunInTx, one UPDATE
// of a row) without and with recording one effect in it (Outbox.Record:
// one statement of its own: it checks the claim,
// inserts and notifies), and, for the cost of one more round trip, with a
// SELECT 1 instead. Goal: record/fenced <= 1.2.
func BenchmarkOutboxRecord(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	ob, err := postgres.NewOutbox(pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := ob.CreateTable(ctx); err != nil {
		b.Fatal(err)
	}
	const update = "UPDATE accounts SET balance = $2 WHERE id = $1"
	var seq int64
	payload := make([]byte, 200)
	interleave(b, []string{"fenced", "record", "select1"}, []func(int) error{
		func(i int) error {
			return postgres.RunInTx(ctx, pool, "a", 1, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, update, "a", i)
				return err
			})
		},
		func(i int) error {
			return postgres.RunInTx(ctx, pool, "a", 1, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, update, "a", i); err != nil {
					return err
				}
				seq++
				return ob.Record(ctx, tx, outbox.Effect{Resource: "a", Token: 1, Seq: seq,
					Destination: "https://mail.example/send", Payload: payload})
			})
		},
		func(i int) error {
			return postgres.RunInTx(ctx, pool, "a", 1, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, update, "a", i); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "SELECT 1")
				return err
			})
		},
	})
}
