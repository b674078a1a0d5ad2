package harness

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// readSQL reads the SQLite log, in commit order, and the rows' final
// values, from the run's database file at path.
func readSQL(ctx context.Context, h *check.Storage, path string) error {
	db, err := openSQLite(path)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT resource, tok, val FROM "+sqlLogTable+" ORDER BY id")
	if err != nil {
		return fmt.Errorf("harness: reading %s: %w", sqlLogTable, err)
	}
	defer rows.Close()
	if err := scanLog(h, rows); err != nil {
		return err
	}
	final, err := db.QueryContext(ctx, "SELECT key, val FROM "+sqlRowsTable)
	if err != nil {
		return fmt.Errorf("harness: reading %s: %w", sqlRowsTable, err)
	}
	defer final.Close()
	return scanFinal(h, check.ResSQL, final)
}
