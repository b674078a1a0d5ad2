package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// auditSQL gives accounts what makes a write's side effects visible: a
// column filled from a sequence, and row- and statement-level BEFORE
// triggers that each append a row to audit.
const auditSQL = `
ALTER TABLE accounts ADD COLUMN serial bigserial;
CREATE TABLE audit (level text NOT NULL, op text NOT NULL);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN INSERT INTO audit VALUES ('row', TG_OP); RETURN NEW; END $$;
CREATE FUNCTION audit_statement() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN INSERT INTO audit VALUES ('statement', TG_OP); RETURN NULL; END $$;
CREATE TRIGGER audit_row BEFORE INSERT OR UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit_statement BEFORE INSERT OR UPDATE ON accounts FOR EACH STATEMENT EXECUTE FUNCTION audit_statement()`

// sideEffects is what a write leaves besides the row: the audit rows of
// row-level triggers, and the sequence's position. (Statement-level
// triggers fire for every INSERT or UPDATE statement, even one that
// changes no row: the documented exception.)
type sideEffects struct{ rowAudit, seq int64 }

func readSideEffects(t *testing.T, db postgres.DB) sideEffects {
	t.Helper()
	var s sideEffects
	err := db.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM audit WHERE level = 'row'),
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM accounts_serial_seq)`).Scan(&s.rowAudit, &s.seq)
	if err != nil {
		t.Fatalf("reading side effects: %v", err)
	}
	return s
}

// newAudited returns accounts holding a (balance 70, fence 7), with the
// triggers and sequence of auditSQL.
func newAudited(t *testing.T) (*pgxpool.Pool, *postgres.Table) {
	t.Helper()
	pool, tbl := newAccounts(t)
	mustExec(t, pool, auditSQL)
	if err := tbl.Upsert(t.Context(), pool, "a", 7, postgres.Set("balance", 70)); err != nil {
		t.Fatalf("first Upsert: got %v, want nil", err)
	}
	return pool, tbl
}

// TestRefusedWriteNoSideEffects: a refused Update or Upsert runs no
// row-level trigger and advances no sequence. The control
// is the upsert as one statement (how Upsert sent it before): refused all
// the same, it fires the triggers and advances the sequence.
func TestRefusedWriteNoSideEffects(t *testing.T) {
	tests := []struct {
		name  string
		write func(context.Context, *pgxpool.Pool, *postgres.Table) error
	}{
		{"Upsert", func(ctx context.Context, pool *pgxpool.Pool, tbl *postgres.Table) error {
			return tbl.Upsert(ctx, pool, "a", 6, postgres.Set("balance", 60))
		}},
		{"Update", func(ctx context.Context, pool *pgxpool.Pool, tbl *postgres.Table) error {
			return tbl.Update(ctx, pool, "a", 6, postgres.Set("balance", 60))
		}},
		{"Store.Put", func(ctx context.Context, pool *pgxpool.Pool, _ *postgres.Table) error {
			s, err := postgres.NewStore(pool, pgx.Identifier{"accounts"})
			if err != nil {
				return err
			}
			return s.Put(ctx, "a", 6, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl := newAudited(t)
			if tt.name == "Store.Put" {
				mustExec(t, pool, `ALTER TABLE accounts RENAME id TO key;
					ALTER TABLE accounts RENAME fence TO token;
					ALTER TABLE accounts ADD COLUMN value bytea NOT NULL DEFAULT ''`)
			}
			before := readSideEffects(t, pool)
			fencewant.Stale(t, tt.write(t.Context(), pool, tbl), 6, 7)
			if after := readSideEffects(t, pool); after != before {
				t.Fatalf("side effects of the refused write: got %d row-trigger audit rows, sequence at %d; want %d and %d, as before it",
					after.rowAudit, after.seq, before.rowAudit, before.seq)
			}
		})
	}
	t.Run("control, one statement", func(t *testing.T) {
		pool, _ := newAudited(t)
		before := readSideEffects(t, pool)
		tag, err := pool.Exec(t.Context(), `INSERT INTO accounts AS cur (id, balance, fence) VALUES ($1, $3, $2)
			ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence
			WHERE cur.fence <= EXCLUDED.fence`, "a", int64(6), int64(60))
		if err != nil || tag.RowsAffected() != 0 {
			t.Fatalf("control upsert: got %v, %d rows, want nil, 0 rows (refused)", err, tag.RowsAffected())
		}
		if after := readSideEffects(t, pool); after.rowAudit <= before.rowAudit || after.seq <= before.seq {
			t.Fatalf("control: got %+v after, %+v before, want more row-trigger audit rows and the sequence advanced", after, before)
		}
	})
}

// TestRefusedUpsertRacingNewerHolder: an upsert that waits behind a newer
// holder's uncommitted write of the row is refused by its ON CONFLICT
// condition once that holder commits. Its snapshot predates that write, so
// its INSERT ran: this is the documented exception, where row triggers and
// defaults may have run; the row is untouched all the same.
func TestRefusedUpsertRacingNewerHolder(t *testing.T) {
	pool, tbl := newAudited(t)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := tbl.Update(ctx, tx, "a", 9, postgres.Set("balance", 90)); err != nil {
		t.Fatalf("newer holder's Update: got %v, want nil", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- tbl.Upsert(ctx, pool, "a", 8, postgres.Set("balance", 80)) }()
	waitLockWaiters(t, pool, 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fencewant.Stale(t, <-errc, 8, 9)
	wantAccount(t, pool, "a", 90, 9)
}
