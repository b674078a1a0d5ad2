package postgres

import (
	"cmp"
	"context"
	"fmt"
)

// tokenSetting is the transaction-local setting in which a passed fence
// guard ([Fences.Advance], [Fences.RunInTx], [Fences.Exec]) records its
// token, for the row trigger.
const tokenSetting = "fencelock.token"

// staleRowCode is the SQLSTATE the row trigger raises when a fenced
// transaction writes a row whose fence column is higher than its token.
const staleRowCode = "FL409"

// rowFenceFunction is the trigger function of [Table.CreateTrigger]. Inside
// a fenced transaction it refuses to change a row whose fence column (named
// by the trigger's argument) is above the transaction's token, and raises
// the column to the token; elsewhere it does nothing.
const rowFenceFunction = `CREATE OR REPLACE FUNCTION fencelock_row_fence() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	tok bigint := nullif(current_setting('` + tokenSetting + `', true), '')::bigint;
	cur bigint;
BEGIN
	IF tok IS NULL THEN
		RETURN NEW;
	END IF;
	IF TG_OP = 'UPDATE' THEN
		cur := (to_jsonb(OLD) ->> TG_ARGV[0])::bigint;
		IF cur > tok THEN
			RAISE EXCEPTION USING ERRCODE = '` + staleRowCode + `',
				MESSAGE = format('fencelock: stale token %s: a row of %I.%I has fence %s', tok, TG_TABLE_SCHEMA, TG_TABLE_NAME, cur);
		END IF;
	END IF;
	IF coalesce((to_jsonb(NEW) ->> TG_ARGV[0])::bigint, 0) < tok THEN
		NEW := jsonb_populate_record(NEW, jsonb_build_object(TG_ARGV[0], tok));
	END IF;
	RETURN NEW;
END
$fn$`

// CreateTrigger installs a trigger on the table (and the function
// fencelock_row_fence it runs) that gives each row one floor, its fence
// column, whichever API writes it. Without it, a row written both through
// the Table and by SQL inside a fenced transaction ([Fences.RunInTx],
// [Fences.Exec], or after [Fences.Advance]) has two independent floors: the
// transaction's fence-table row does not raise the row's fence column, so a
// stale [Table.Update] can land after a newer transaction's write.
//
// With the trigger, an INSERT or UPDATE of a row inside a fenced transaction
// fails with an error matching [fence.ErrStale] (SQLSTATE FL409) when the
// row's fence column is above the transaction's token, and otherwise raises
// the column to that token. Writes outside fenced transactions are left to
// the Table's own condition. (DELETE is not covered: see [Table].)
//
// A [Fences.RunInTxAll] whose claims carry several tokens (a transfer under
// a MultiLock) records no token for the trigger, which then checks nothing
// in it: in such a transaction write the rows of a Table with
// [Table.Update] and each row's own token, not with plain SQL, or an older
// holder's transaction and a newer holder's Table writes can pass each
// other (each path has its own floor).
//
// It needs PostgreSQL 14 or later and the right to create functions and
// triggers; run it once, at deployment, like CREATE TABLE. ctx bounds the
// call.
func (t *Table) CreateTrigger(ctx context.Context, db DB) error {
	if err := cmp.Or(t.check(), checkDB(db)); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	trigger := "CREATE OR REPLACE TRIGGER fencelock_row_fence BEFORE INSERT OR UPDATE ON " + t.name +
		" FOR EACH ROW EXECUTE FUNCTION fencelock_row_fence(" + quoteLiteral(t.fenRaw) + ")"
	for _, sql := range []string{rowFenceFunction, trigger} {
		if _, err := db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("postgres: create fence trigger on %s: %w", t.label, classify(err))
		}
	}
	return nil
}
