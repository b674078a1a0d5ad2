package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// TestUpdateNeedsUniqueKey: Update refuses, with ErrSchema and before
// writing, a key column that no unique index of its own covers, since it
// could then land on some rows with that key and be refused on others.
func TestUpdateNeedsUniqueKey(t *testing.T) {
	tests := []struct {
		name    string
		index   string
		wantErr error
	}{
		{"no index", "", postgres.ErrSchema},
		{"plain index", "CREATE INDEX ON dup (id)", postgres.ErrSchema},
		{"unique on two columns", "CREATE UNIQUE INDEX ON dup (id, balance)", postgres.ErrSchema},
		{"partial unique", "CREATE UNIQUE INDEX ON dup (id) WHERE balance > 0", postgres.ErrSchema},
		{"unique on an expression", "CREATE UNIQUE INDEX ON dup (lower(id))", postgres.ErrSchema},
		{"unique", "CREATE UNIQUE INDEX ON dup (id) INCLUDE (balance)", nil},
		{"primary key", "ALTER TABLE dup ADD PRIMARY KEY (id)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := pgtest.NewPool(t)
			mustExec(t, pool, "CREATE TABLE dup (id text NOT NULL, balance bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)")
			if tt.index != "" {
				mustExec(t, pool, tt.index)
			}
			mustExec(t, pool, "INSERT INTO dup (id, fence) VALUES ('k', 1), ('j', 9)")
			tbl, err := postgres.NewTable(pgx.Identifier{"dup"}, postgres.WithKeyColumn("id"))
			if err != nil {
				t.Fatal(err)
			}
			err = tbl.Update(t.Context(), pool, "k", 5, postgres.Set("balance", 50))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Update: got %v, want %v", err, tt.wantErr)
			}
			var changed int
			if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM dup WHERE balance = 50").Scan(&changed); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tt.wantErr != nil]; changed != want {
				t.Fatalf("rows changed: got %d, want %d", changed, want)
			}
		})
	}
}

// TestUpdateDuplicateKeyControl: without the check, one UPDATE of a
// duplicated key lands on one row and is refused on the other, and reports
// success.
func TestUpdateDuplicateKeyControl(t *testing.T) {
	pool := pgtest.NewPool(t)
	mustExec(t, pool, "CREATE TABLE dup (id text NOT NULL, balance bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)")
	mustExec(t, pool, "INSERT INTO dup (id, fence) VALUES ('k', 1), ('k', 9)")
	tag, err := pool.Exec(t.Context(), `UPDATE dup SET balance = 50, fence = 5 WHERE id = 'k' AND fence <= 5`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("control: got %v, %d rows, want nil, 1 row of the 2 with key k", err, tag.RowsAffected())
	}
}
