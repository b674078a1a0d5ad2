package sqlfence

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

// minSQLite is the first SQLite with INSERT ... ON CONFLICT DO UPDATE
// (3.24.0, 2018), which every fenced upsert needs; minSQLiteReturning
// the first with RETURNING (3.35.0, 2021), which only the fenced reads
// use ([Table.GetForUpdate], [Store.GetForUpdate], [Store.Update]),
// so that older SQLite builds still fence writes.
var (
	minSQLite          = [3]int{3, 24, 0}
	minSQLiteReturning = [3]int{3, 35, 0}
)

// upsertError is writeError for an upsert, which on an SQLite too old for
// ON CONFLICT DO UPDATE fails with a syntax error: that is reported as
// [ErrUnsupported], with the version.
func (d Dialect) upsertError(ctx context.Context, db DB, resource string, token fence.Token, err error) error {
	if uerr := d.tooOld(ctx, db, err, sqliteSupportsUpsert); uerr != nil {
		return uerr
	}
	return d.writeError(db, "upsert", resource, token, err)
}

// readError is writeError for a fenced read, which on an SQLite too old
// for RETURNING fails with a syntax error: that is reported as
// [ErrUnsupported], with the version.
func (d Dialect) readError(ctx context.Context, db DB, resource string, token fence.Token, err error) error {
	if uerr := d.tooOld(ctx, db, err, sqliteSupportsReturning); uerr != nil {
		return uerr
	}
	return d.writeError(db, "fenced read", resource, token, err)
}

// tooOld returns the error of supports, wrapping err, when err is
// SQLite's syntax error and the server's version is too old for the
// statement; otherwise nil.
func (d Dialect) tooOld(ctx context.Context, db DB, err error, supports func(string) error) error {
	if d != SQLite || !strings.Contains(err.Error(), "syntax error") {
		return nil
	}
	var v string
	if db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v) != nil {
		return nil
	}
	if uerr := supports(v); uerr != nil {
		return fmt.Errorf("%w (%w)", uerr, err)
	}
	return nil
}

// sqliteSupportsUpsert returns an error matching [ErrUnsupported] when
// version (as sqlite_version() gives it) is older than 3.24.0.
func sqliteSupportsUpsert(version string) error {
	return sqliteAtLeast(version, minSQLite, "INSERT ... ON CONFLICT DO UPDATE, which fenced upserts need")
}

// sqliteSupportsReturning returns an error matching [ErrUnsupported] when
// version is older than 3.35.0.
func sqliteSupportsReturning(version string) error {
	return sqliteAtLeast(version, minSQLiteReturning, "RETURNING, which fenced reads need")
}

// sqliteAtLeast returns an error matching [ErrUnsupported], saying that
// the version has no feature, when version is older than min.
func sqliteAtLeast(version string, min [3]int, feature string) error {
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
		if got[i] != min[i] {
			if got[i] < min[i] {
				return fmt.Errorf("%w: SQLite %s has no %s (%d.%d.%d or later)", ErrUnsupported, version, feature, min[0], min[1], min[2])
			}
			return nil
		}
	}
	return nil
}
