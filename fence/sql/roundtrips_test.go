package sqlfence_test

import (
	"database/sql"
	"testing"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// mariaDBRoundTrips returns the round trips the one connection of db
// (MariaDB) has made so far: statements run (Questions, which counts
// COM_QUERY and COM_STMT_EXECUTE) and prepared (Com_stmt_prepare), each
// answered by the server; COM_STMT_CLOSE has no answer. The read itself
// counts one.
func mariaDBRoundTrips(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var q, p int64
	err := db.QueryRowContext(t.Context(), `SELECT
		(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'QUESTIONS'),
		(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_STMT_PREPARE')`).Scan(&q, &p)
	if err != nil {
		t.Fatal(err)
	}
	return q + p
}

// TestRoundTripsMariaDB counts, on MariaDB with the driver's defaults
// and with interpolateParams, the round trips of the forms
// BenchmarkFencedRead and BenchmarkReadModifyWrite time against their
// plain twins: a fenced read of a row claimed already, in autocommit and
// in a transaction, takes no more than the plain SELECT.
func TestRoundTripsMariaDB(t *testing.T) {
	for _, srv := range benchServers[:2] {
		t.Run(srv.name, func(t *testing.T) {
			db := srv.open(t)
			db.SetMaxOpenConns(1)
			ctx := t.Context()
			mustExec(t, db, accountsDDL(srv.d))
			mustExec(t, db, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 0, 1)")
			tbl, err := sqlfence.NewTable(srv.d, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
			if err != nil {
				t.Fatal(err)
			}
			var bal int64
			inTx := func(body func(tx *sql.Tx) error) error { return commitTx(ctx, db, body) }
			count := func(op func() error) int64 {
				t.Helper()
				if err := op(); err != nil { // the first prepares
					t.Fatal(err)
				}
				before := mariaDBRoundTrips(t, db)
				if err := op(); err != nil {
					t.Fatal(err)
				}
				return mariaDBRoundTrips(t, db) - before - 1
			}
			plainRead := count(func() error {
				return db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ?", "a").Scan(&bal)
			})
			fencedRead := count(func() error { return tbl.GetForUpdate(ctx, db, "a", 1, []string{"balance"}, &bal) })
			plainRMW := count(func() error {
				return inTx(func(tx *sql.Tx) error {
					if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ?", "a").Scan(&bal); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = ?", bal+1, "a")
					return err
				})
			})
			fencedRMW := count(func() error {
				return inTx(func(tx *sql.Tx) error {
					if err := tbl.GetForUpdate(ctx, tx, "a", 1, []string{"balance"}, &bal); err != nil {
						return err
					}
					return tbl.Update(ctx, tx, "a", 1, sqlfence.Set("balance", bal+1))
				})
			})
			t.Logf("round trips: read %d, fenced %d; read-modify-write %d, fenced %d", plainRead, fencedRead, plainRMW, fencedRMW)
			for _, c := range []struct {
				name          string
				fenced, plain int64
			}{
				{"read", fencedRead, plainRead},
				{"read-modify-write", fencedRMW, plainRMW},
			} {
				if c.fenced > c.plain {
					t.Errorf("%s: got %d round trips fenced, want no more than the plain form's %d", c.name, c.fenced, c.plain)
				}
			}
		})
	}
}
