package sqlfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// A Table, Fences or Store of one dialect used on a database of another
// either works as it would on its own (SQLite takes backticks and $1) or
// fails with an error that names both dialects (ErrDialect), not with the
// server's bare syntax error, and not as a write whose outcome is unknown:
// a statement that did not parse wrote nothing. Every pair of the three
// servers; the was a MySQL Table on SQLite, whose stale write's
// read-back said only `near ">": syntax error`. Whatever works on the wrong
// server must still fence.
func TestDialectMismatch(t *testing.T) {
	refused := 0
	for _, db := range servers {
		for _, stmt := range servers {
			if db.d == stmt.d {
				continue
			}
			t.Run(stmt.name+" on "+db.name, func(t *testing.T) {
				check := func(what string, err error) bool {
					t.Helper()
					if err == nil {
						return true
					}
					refused++
					if !errors.Is(err, sqlfence.ErrDialect) || !errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrUnknownOutcome) {
						t.Errorf("%s: %v, want nil or ErrDialect (an invalid argument, not an unknown outcome)", what, err)
						return false
					}
					for _, want := range []string{"the statement is " + stmt.d.String(), "answered as " + db.d.String()} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("%s: %q lacks %q", what, err, want)
						}
					}
					return false
				}
				h, _ := newAccounts(t, db)
				mustExec(t, h, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 10, 0)")
				tbl, err := sqlfence.NewTable(stmt.d, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
				if err != nil {
					t.Fatal(err)
				}
				if check("Table.Update", tbl.Update(t.Context(), h, "a", 5, sqlfence.Set("balance", 20))) {
					wantAccount(t, db, h, "a", 20, 5)
					// Working on the wrong server must still fence.
					if err := tbl.Update(t.Context(), h, "a", 4, sqlfence.Set("balance", 99)); !errors.Is(err, fence.ErrStale) && check("a stale Update", err) {
						t.Errorf("a stale Update: nil, want ErrStale or ErrDialect")
					}
					wantAccount(t, db, h, "a", 20, 5)
				} else {
					wantAccount(t, db, h, "a", 10, 0)
				}
				s, err := sqlfence.NewStore(h, stmt.d, sqlfence.Identifier{"kv"})
				if err != nil {
					t.Fatal(err)
				}
				if !check("Store.CreateTable", s.CreateTable(t.Context())) {
					return
				}
				if check("Store.Put", s.Put(t.Context(), "k", 3, []byte("v"))) {
					if err := s.Put(t.Context(), "k", 2, []byte("stale")); !errors.Is(err, fence.ErrStale) && check("a stale Put", err) {
						t.Errorf("a stale Put: nil, want ErrStale or ErrDialect")
					}
				}
				_, err = s.GetForUpdate(t.Context(), "k", 4)
				check("Store.GetForUpdate", err)
				check("Store.Update", s.Update(t.Context(), "k", 5, func(r fence.Record) ([]byte, error) { return append(r.Value, 'x'), nil }))
				check("Table.Upsert", tbl.Upsert(t.Context(), h, "b", 6, sqlfence.Set("balance", 1)))
				var bal int64
				check("Table.GetForUpdate", tbl.GetForUpdate(t.Context(), h, "a", 7, []string{"balance"}, &bal))
				f, err := sqlfence.NewFences(stmt.d, sqlfence.Identifier{"fences"})
				if err != nil {
					t.Fatal(err)
				}
				if check("Fences.CreateTable", f.CreateTable(t.Context(), h)) {
					check("Fences.Advance", f.Advance(t.Context(), h, "r", 8))
				}
			})
		}
	}
	if refused == 0 {
		t.Error("no statement of one dialect was refused by another's server: the test proves nothing")
	}
}
