package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
)

// TestOutboxRecordHeld: in RunInTx, Record holds its statement back and
// sends it with COMMIT; a failure of it (a duplicate, an unclaimed
// resource) is RunInTx's error and nothing commits, neither the effect
// nor the state change beside it. Control: a new, claimed effect lands
// with its state change.
func TestOutboxRecordHeld(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	first := effect("acct", 1, 0)
	write := func(e outbox.Effect) error {
		return postgres.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
			if err := credit(ctx, tx, "acct"); err != nil {
				return err
			}
			if err := ob.Record(ctx, tx, e); err != nil {
				t.Fatalf("held Record: got error %v, want nil (its failure is RunInTx's)", err)
			}
			return nil
		})
	}
	if err := write(first); err != nil {
		t.Fatalf("RunInTx recording %s: got error %v, want nil", first.Key(), err)
	}
	tests := []struct {
		name string
		e    outbox.Effect
		want error
	}{
		{"duplicate", first, outbox.ErrDuplicate},
		{"unclaimed resource", effect("other", 1, 0), postgres.ErrNotClaimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := write(tt.e); !errors.Is(err, tt.want) {
				t.Fatalf("RunInTx: got error %v, want %v", err, tt.want)
			}
			if bal, _, _ := account(t, pool, "acct"); bal != 1 {
				t.Fatalf("balance: got %d, want 1 (the failed transaction's credit rolled back)", bal)
			}
			wantPending(t, ob, first)
		})
	}
	second := effect("acct", 1, 1)
	if err := write(second); err != nil {
		t.Fatalf("RunInTx recording %s: got error %v, want nil", second.Key(), err)
	}
	if bal, _, _ := account(t, pool, "acct"); bal != 2 {
		t.Fatalf("balance: got %d, want 2", bal)
	}
	wantPending(t, ob, first, second)
}

// TestOutboxRecordHeldOrder: a held Record runs before the transaction's
// next statement, which sees its effect, and a failure of it is that
// statement's error; a Record in a savepoint, or after RunInTx returned,
// runs at once. Control: the effects land in the order recorded.
func TestOutboxRecordHeldOrder(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	a, b, c := effect("acct", 1, 0), effect("acct", 1, 1), effect("acct", 1, 2)
	var kept pgx.Tx
	err := postgres.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
		kept = tx
		if err := ob.Record(ctx, tx, a); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM fencelock_outbox").Scan(&n); err != nil || n != 1 {
			t.Fatalf("effects seen after Record: got %d, %v, want 1, nil", n, err)
		}
		if err := ob.Record(ctx, tx, b); err != nil {
			return err
		}
		return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return ob.Record(ctx, sp, c) })
	})
	if err != nil {
		t.Fatalf("RunInTx: got error %v, want nil", err)
	}
	wantPending(t, ob, a, b, c)
	if err := ob.Record(ctx, kept, effect("acct", 1, 3)); err == nil {
		t.Fatal("Record in a transaction RunInTx ended: got nil, want an error")
	}

	err = postgres.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
		if err := ob.Record(ctx, tx, a); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT 1")
		if !errors.Is(err, outbox.ErrDuplicate) {
			t.Fatalf("the statement after a duplicate held Record: got error %v, want outbox.ErrDuplicate", err)
		}
		return err
	})
	if !errors.Is(err, outbox.ErrDuplicate) || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("RunInTx: got error %v, want outbox.ErrDuplicate", err)
	}
	wantPending(t, ob, a, b, c)
}
