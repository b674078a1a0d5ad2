package harness

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// readPostgres reads the log and the final values of the run's keys.
func readPostgres(ctx context.Context, h *check.Storage, pool *pgxpool.Pool, keys []string) error {
	var resources []string
	for _, k := range keys {
		resources = append(resources, check.ResourceName(check.ResRow, k), check.ResourceName(check.ResTx, k))
	}
	rows, err := pool.Query(ctx, "SELECT resource, tok, val FROM harness_log WHERE resource = ANY($1) ORDER BY id", resources)
	if err != nil {
		return fmt.Errorf("harness: reading harness_log: %w", err)
	}
	defer rows.Close()
	if err := scanLog(h, rows); err != nil {
		return err
	}
	if err := readFinal(ctx, h, pool, "harness_rows", check.ResRow, keys); err != nil {
		return err
	}
	return readFinal(ctx, h, pool, "harness_txreg", check.ResTx, keys)
}

func readFinal(ctx context.Context, h *check.Storage, pool *pgxpool.Pool, table string, kind check.ResKind, keys []string) error {
	rows, err := pool.Query(ctx, "SELECT key, val FROM "+table+" WHERE key = ANY($1)", keys)
	if err != nil {
		return fmt.Errorf("harness: reading %s: %w", table, err)
	}
	defer rows.Close()
	return scanFinal(h, kind, rows)
}

// rows is what scanLog and scanFinal need of a query's result: pgx's
// Rows and database/sql's *Rows both have it.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanLog adds a log's (resource, token, value) lines, in commit order, to
// h's writes.
func scanLog(h *check.Storage, rows rows) error {
	for rows.Next() {
		var res string
		var r check.Record
		if err := rows.Scan(&res, &r.Token, &r.Value); err != nil {
			return err
		}
		h.Writes[res] = append(h.Writes[res], r)
	}
	return rows.Err()
}

// scanFinal sets h's final values from (key, value) rows of resources of
// kind.
func scanFinal(h *check.Storage, kind check.ResKind, rows rows) error {
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		h.Final[check.ResourceName(kind, k)] = v
	}
	return rows.Err()
}
