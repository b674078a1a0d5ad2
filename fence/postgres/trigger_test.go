package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// TestOneFloorPerRow: the row accounts/a is written both through the Table
// (its fence column) and by SQL inside fenced transactions (the fence
// table). With the trigger, whichever API the newer holder used, the older
// one's late write is refused; the control, without the trigger, has two
// independent floors and the late write lands.
func TestOneFloorPerRow(t *testing.T) {
	const raw = "UPDATE accounts SET balance = $2 WHERE id = $1"
	viaTable := func(ctx context.Context, pool *pgxpool.Pool, tbl *postgres.Table, tok fence.Token, bal int64) error {
		return tbl.Update(ctx, pool, "a", tok, postgres.Set("balance", bal))
	}
	viaTx := func(ctx context.Context, pool *pgxpool.Pool, _ *postgres.Table, tok fence.Token, bal int64) error {
		return postgres.RunInTx(ctx, pool, "invoice-42", tok, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, raw, "a", bal)
			return err
		})
	}
	viaExec := func(ctx context.Context, pool *pgxpool.Pool, _ *postgres.Table, tok fence.Token, bal int64) error {
		_, err := postgres.Exec(ctx, pool, "invoice-42", tok, raw, "a", bal)
		return err
	}
	type writer func(context.Context, *pgxpool.Pool, *postgres.Table, fence.Token, int64) error
	tests := []struct {
		name         string
		newer, older writer
	}{
		{"RunInTx then Table.Update", viaTx, viaTable},
		{"Exec then Table.Update", viaExec, viaTable},
		{"Table.Update then RunInTx", viaTable, viaTx},
		{"Table.Update then Exec", viaTable, viaExec},
	}
	for _, tt := range tests {
		for _, trigger := range []bool{true, false} {
			name := tt.name
			if !trigger {
				name = "control, no trigger/" + name
			}
			t.Run(name, func(t *testing.T) {
				pool, tbl := newAccounts(t)
				ctx := t.Context()
				if err := postgres.CreateSchema(ctx, pool); err != nil {
					t.Fatal(err)
				}
				if trigger {
					if err := tbl.CreateTrigger(ctx, pool); err != nil {
						t.Fatalf("CreateTrigger: got %v, want nil", err)
					}
				}
				mustExec(t, pool, "INSERT INTO accounts (id) VALUES ('a')")
				if err := tt.newer(ctx, pool, tbl, 34, 340); err != nil {
					t.Fatalf("newer holder's write (token 34): got %v, want nil", err)
				}
				err := tt.older(ctx, pool, tbl, 33, 330)
				balance, _, _ := account(t, pool, "a")
				switch {
				case trigger && (!errors.Is(err, fence.ErrStale) || balance != 340):
					t.Fatalf("older holder's late write (token 33): got %v, balance %d, want fence.ErrStale, balance 340", err, balance)
				case !trigger && (err != nil || balance != 330):
					t.Fatalf("control: older holder's late write (token 33): got %v, balance %d, want nil, balance 330 (it lands)", err, balance)
				}
			})
		}
	}
}
