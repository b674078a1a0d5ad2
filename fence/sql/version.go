package sqlfence

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

// minSQLite is the first SQLite with INSERT ... ON CONFLICT DO UPDATE
// (3.24.0, 2018). This package uses no RETURNING (3.35.0), so that older
// SQLite builds still fence.
var minSQLite = [3]int{3, 24, 0}

// upsertError is writeError for an upsert, which on an SQLite too old for
// ON CONFLICT DO UPDATE fails with a syntax error: that is reported as
// [ErrUnsupported], with the version.
func (d Dialect) upsertError(ctx context.Context, db DB, resource string, token fence.Token, err error) error {
	if d == SQLite && strings.Contains(err.Error(), "syntax error") {
		var v string
		if db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v) == nil {
			if uerr := sqliteSupportsUpsert(v); uerr != nil {
				return fmt.Errorf("%w (%w)", uerr, err)
			}
		}
	}
	return d.writeError(db, "upsert", resource, token, err)
}

// sqliteSupportsUpsert returns an error matching [ErrUnsupported] when
// version (as sqlite_version() gives it) is older than 3.24.0.
func sqliteSupportsUpsert(version string) error {
	parts := strings.SplitN(version, ".", 3)
	var got [3]int
	for i := range got {
		if i >= len(parts) {
			break
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return fmt.Errorf("%w: SQLite version %q not understood", ErrUnsupported, version)
		}
		got[i] = n
	}
	for i := range got {
		if got[i] != minSQLite[i] {
			if got[i] < minSQLite[i] {
				return fmt.Errorf("%w: SQLite %s has no INSERT ... ON CONFLICT DO UPDATE, which fenced upserts need (3.24.0 or later)", ErrUnsupported, version)
			}
			return nil
		}
	}
	return nil
}
