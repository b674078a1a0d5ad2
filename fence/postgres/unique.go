package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// schemaSQL reads what the Table needs of the table ($1, quoted as in
// SQL): whether its key column ($2) and fence column ($3) exist, and
// whether a valid unique index, not partial, has the key column as its only
// key column: only then does "key = $1" pick at most one row. No row when
// there is no such table.
const schemaSQL = `SELECT
	EXISTS (SELECT FROM pg_attribute WHERE attrelid = r AND attname = $2 AND attnum > 0 AND NOT attisdropped),
	EXISTS (SELECT FROM pg_attribute WHERE attrelid = r AND attname = $3 AND attnum > 0 AND NOT attisdropped),
	EXISTS (SELECT FROM pg_index i
	JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = r AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
	AND i.indnkeyatts = 1 AND a.attname = $2)
	FROM (SELECT to_regclass($1) AS r) t WHERE r IS NOT NULL`

// checkUniqueKey makes sure, once per Table, that the key and fence columns
// exist and that the key column is unique, so that [Table.Update] changes
// one row or none. A table that does not exist is left for the write to
// report.
func (t *Table) checkUniqueKey(ctx context.Context, db DB) error {
	if t.keyUnique.Load() {
		return nil
	}
	return t.checkSchema(ctx, db, true)
}

// checkColumns makes sure, once per Table, that the key and fence columns
// exist, so that [Table.Upsert] says which is missing and how to add it.
// The key column's unique constraint is left to the server, which refuses
// an upsert without one.
func (t *Table) checkColumns(ctx context.Context, db DB) error {
	if t.columnsOK.Load() {
		return nil
	}
	return t.checkSchema(ctx, db, false)
}

func (t *Table) checkSchema(ctx context.Context, db DB, needUnique bool) error {
	var hasKey, hasFence, unique bool
	err := db.QueryRow(ctx, schemaSQL, t.name, t.keyRaw, t.fenRaw).Scan(&hasKey, &hasFence, &unique)
	switch {
	case isNoRows(err):
		return nil
	case err != nil:
		return fmt.Errorf("postgres: checking the key and fence columns of %s: %w", t.label, classify(err))
	}
	if err := t.missingColumns(hasKey, hasFence); err != nil {
		return err
	}
	t.columnsOK.Store(true)
	if unique {
		t.keyUnique.Store(true)
	} else if needUnique {
		return fmt.Errorf("%w: key column %q of %s has no unique index or primary key of its own "+
			"(one on that column alone, not partial), so an update could change several rows", ErrSchema, t.keyRaw, t.label)
	}
	return nil
}

// missingColumns says which of the Table's columns the table lacks, and how
// to fix that: name the key column, add the fence column.
func (t *Table) missingColumns(hasKey, hasFence bool) error {
	var missing []string
	if !hasKey {
		missing = append(missing, fmt.Sprintf("has no key column %q (name the table's unique key column with WithKeyColumn; the default is \"key\")", t.keyRaw))
	}
	if !hasFence {
		missing = append(missing, fmt.Sprintf("has no fence column %q; add it with: ALTER TABLE %s ADD COLUMN %s bigint NOT NULL DEFAULT 0",
			t.fenRaw, t.name, pgx.Identifier{t.fenRaw}.Sanitize()))
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: table %s %s", ErrSchema, t.label, strings.Join(missing, ", and "))
}
