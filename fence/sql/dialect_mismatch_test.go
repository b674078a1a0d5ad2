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
// servers; the issue's was a MySQL Store on SQLite ("near \">\": syntax
// error").
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
				check("Store.Put", s.Put(t.Context(), "k", 3, []byte("v")))
			})
		}
	}
	if refused == 0 {
		t.Error("no statement of one dialect was refused by another's server: the test proves nothing")
	}
}
