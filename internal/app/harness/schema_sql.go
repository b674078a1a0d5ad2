package harness

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// sqlRowsTable is the SQLite table of the sql resource kind; sqlLogTable
// is the database's own history of it: a trigger adds a line for every row
// the table's inserts and updates write, in the same statement, and a
// refused fenced upsert writes no row and fires no trigger. SQLite has one
// writer at a time, so the log's ids are the commit order.
const (
	sqlRowsTable = "harness_sqlrows"
	sqlLogTable  = "harness_sqllog"
)

// sqlResourcePrefix starts the log's resource names: the log names
// resources as the checker does (check.ResourceName).
var sqlResourcePrefix = check.ResourceName(check.ResSQL, "")

var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS ` + sqlLogTable + ` (
		id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, tok INTEGER NOT NULL, val TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS ` + sqlRowsTable + ` (key TEXT PRIMARY KEY, val TEXT NOT NULL, fence INTEGER NOT NULL DEFAULT 0)`,
	`CREATE TRIGGER IF NOT EXISTS harness_sqlrows_ins AFTER INSERT ON ` + sqlRowsTable + ` BEGIN
		INSERT INTO ` + sqlLogTable + ` (resource, tok, val) VALUES ('` + sqlResourcePrefix + `' || NEW.key, NEW.fence, NEW.val);
	END`,
	`CREATE TRIGGER IF NOT EXISTS harness_sqlrows_upd AFTER UPDATE ON ` + sqlRowsTable + ` BEGIN
		INSERT INTO ` + sqlLogTable + ` (resource, tok, val) VALUES ('` + sqlResourcePrefix + `' || NEW.key, NEW.fence, NEW.val);
	END`,
}

// openSQLite opens the run's SQLite database file, as docs/sql.md says: in
// WAL mode, so that readers do not block the writer, with a busy_timeout,
// so that a writer waits for another's lock rather than failing at once.
// synchronous stays FULL (the default): a commit is on disk before it is
// acknowledged. A worker killed mid-statement loses nothing committed:
// its lock goes with its process, and the next writer ignores WAL frames
// with no commit.
func openSQLite(path string) (*sql.DB, error) {
	// busy_timeout first: the other pragmas may have to wait for a lock.
	q := url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)"}}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("harness: opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// createSQLiteSchema creates the database file at path and its tables.
func createSQLiteSchema(ctx context.Context, path string) error {
	db, err := openSQLite(path)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range sqliteSchema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("harness: SQLite schema: %w", err)
		}
	}
	return nil
}
