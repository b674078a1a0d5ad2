package postgres

import (
	"context"
	"fmt"
)

// uniqueKeySQL reports whether the table ($1, quoted as in SQL) has a valid
// unique index, not partial, whose only key column is $2: only then does
// "key = $1" pick at most one row. NULL when there is no such table.
const uniqueKeySQL = `SELECT EXISTS (SELECT FROM pg_index i
	JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = r AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
	AND i.indnkeyatts = 1 AND a.attname = $2)
	FROM (SELECT to_regclass($1) AS r) t WHERE r IS NOT NULL`

// checkUniqueKey makes sure, once per Table, that the key column is unique,
// so that [Table.Update] changes one row or none. A table that does not
// exist is left for the write to report.
func (t *Table) checkUniqueKey(ctx context.Context, db DB) error {
	if t.keyUnique.Load() {
		return nil
	}
	var unique *bool
	err := db.QueryRow(ctx, uniqueKeySQL, t.name, t.keyRaw).Scan(&unique)
	switch {
	case err != nil && !isNoRows(err):
		return fmt.Errorf("postgres: checking that %s.%s is unique: %w", t.label, t.keyRaw, classify(err))
	case unique != nil && !*unique:
		return fmt.Errorf("%w: key column %q of %s has no unique index or primary key of its own "+
			"(one on that column alone, not partial), so an update could change several rows", ErrSchema, t.keyRaw, t.label)
	case unique != nil:
		t.keyUnique.Store(true)
	}
	return nil
}
