package postgres_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/pgtag"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestTagMergeMatchesSQL: the tag this package's claims compute in the
// client (pgtag.Merge, from the application_name the server reports) is
// the one the server computes with pgtag.SQL (fence/sql's), whatever the
// application_name before the claim: none of ours, a tag with entries,
// with none, with "+", one an entry no longer fits in.
func TestTagMergeMatchesSQL(t *testing.T) {
	pool := pgtest.NewPool(t)
	e := pgtag.Entry
	before := []string{
		"", "psql", "fencelock:t=3", "fencelock:t=x-7;" + e("A", 3),
		"fencelock:t=3-7", "fencelock:t=3-7;", "fencelock:t=3-7;" + e("A", 3), "fencelock:t=3-7;+",
		"fencelock:t=3-7;" + e("A", 3) + ";" + e("B", 7) + ";" + e("C", 5),
		"fencelock:t=1000000000-1000000004;" + e("A", 1000000000) + ";" + e("B", 1000000004),
	}
	claims := []struct {
		lo, hi  int64
		entries string
	}{
		{5, 5, e("D", 5)},
		{1, 9, e("D", 1) + ";" + e("E", 9)},
		{1000000005, 1000000005, e("F", 1000000005)},
	}
	sql := "SELECT " + pgtag.SQL("$1::bigint", "$2::bigint", "$3::text")
	for _, cur := range before {
		for _, c := range claims {
			var got, reported string
			err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(t.Context(), "SELECT set_config('application_name', $1, true)", cur); err != nil {
					return err
				}
				// What the claim computes from: the name as the server
				// keeps it (63 bytes at most) and reports it.
				reported = tx.Conn().PgConn().ParameterStatus("application_name")
				return tx.QueryRow(t.Context(), sql, c.lo, c.hi, c.entries).Scan(&got)
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := pgtag.Merge(reported, c.lo, c.hi, c.entries); got != want {
				t.Errorf("application_name %q (reported %q), claim %d-%d %q: pgtag.SQL gives %q, pgtag.Merge %q",
					cur, reported, c.lo, c.hi, c.entries, got, want)
			}
		}
	}
}

// TestTagClaimAgain: a claim of a row the transaction claimed already with
// the same token (the write after GetForUpdate) leaves its tag as it was,
// rather than naming the row twice; a claim of another row, or with
// another token, adds to it.
func TestTagClaimAgain(t *testing.T) {
	pool, tbl := newBank(t)
	var names []string
	err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		var bal int64
		for _, claim := range []func() error{
			func() error { return tbl.GetForUpdate(t.Context(), tx, "A", 7, []string{"balance"}, &bal) },
			func() error { return tbl.Update(t.Context(), tx, "A", 7, postgres.Add("balance", -1)) },
			func() error { return tbl.Update(t.Context(), tx, "B", 7, postgres.Add("balance", 1)) },
			func() error { return tbl.Update(t.Context(), tx, "A", 8, postgres.Add("balance", 1)) },
		} {
			if err := claim(); err != nil {
				return err
			}
			var name string
			if err := tx.QueryRow(t.Context(), "SELECT current_setting('application_name')").Scan(&name); err != nil {
				return err
			}
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a7, b7, a8 := pgtag.Entry("accounts/A", 7), pgtag.Entry("accounts/B", 7), pgtag.Entry("accounts/A", 8)
	want := []string{"fencelock:t=7-7;" + a7, "fencelock:t=7-7;" + a7, "fencelock:t=7-7;" + a7 + ";" + b7, "fencelock:t=7-8;" + a7 + ";" + b7 + ";" + a8}
	if !slices.Equal(names, want) {
		t.Fatalf("application_name after each claim: got %q, want %q", names, want)
	}
}
