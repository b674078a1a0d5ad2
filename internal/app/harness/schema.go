package harness

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence/postgres"
)

// schema is the harness's PostgreSQL tables. harness_log is the database's
// own history: every write to harness_rows adds a line through a trigger in
// the same statement, every fenced transaction adds one itself; bigserial
// ids give the commit order per resource, since writes to one resource are
// serialised by its row lock.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS harness_log (
		id bigserial PRIMARY KEY, resource text NOT NULL, tok bigint NOT NULL, val text NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS harness_rows (key text PRIMARY KEY, val text NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
	`CREATE TABLE IF NOT EXISTS harness_txreg (key text PRIMARY KEY, val text NOT NULL, tok bigint NOT NULL)`,
	`CREATE OR REPLACE FUNCTION harness_log_row() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO harness_log (resource, tok, val) VALUES ('row:' || NEW.key, NEW.fence, NEW.val);
		RETURN NULL;
	END $$`,
	`CREATE OR REPLACE TRIGGER harness_rows_log AFTER INSERT OR UPDATE ON harness_rows
		FOR EACH ROW EXECUTE FUNCTION harness_log_row()`,
}

// createSchema creates the harness's tables and fence/postgres's own.
func createSchema(ctx context.Context, pool *pgxpool.Pool) error {
	for _, stmt := range schema {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("harness: schema: %w", err)
		}
	}
	return postgres.CreateSchema(ctx, pool)
}
