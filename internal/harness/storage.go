package harness

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// record is one write as the storage recorded it.
type record struct {
	Token int64
	Value string
}

// storageHistory is the storage's own record of a run: for each resource,
// the writes it accepted in commit order, and the value it holds at the end.
type storageHistory struct {
	writes map[string][]record
	final  map[string]string
}

func newStorageHistory() *storageHistory {
	return &storageHistory{writes: map[string][]record{}, final: map[string]string{}}
}

// readPostgres reads the log and the final values of the run's keys.
func (h *storageHistory) readPostgres(ctx context.Context, pool *pgxpool.Pool, keys []string) error {
	var resources []string
	for _, k := range keys {
		resources = append(resources, ResRow+":"+k, ResTx+":"+k)
	}
	rows, err := pool.Query(ctx, "SELECT resource, tok, val FROM harness_log WHERE resource = ANY($1) ORDER BY id", resources)
	if err != nil {
		return fmt.Errorf("harness: reading harness_log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var res string
		var r record
		if err := rows.Scan(&res, &r.Token, &r.Value); err != nil {
			return err
		}
		h.writes[res] = append(h.writes[res], r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := h.readFinal(ctx, pool, "harness_rows", ResRow, keys); err != nil {
		return err
	}
	return h.readFinal(ctx, pool, "harness_txreg", ResTx, keys)
}

func (h *storageHistory) readFinal(ctx context.Context, pool *pgxpool.Pool, table, kind string, keys []string) error {
	rows, err := pool.Query(ctx, "SELECT key, val FROM "+table+" WHERE key = ANY($1)", keys)
	if err != nil {
		return fmt.Errorf("harness: reading %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		h.final[kind+":"+k] = v
	}
	return rows.Err()
}
