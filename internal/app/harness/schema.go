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
	// Created once, not replaced: replacing a trigger locks its table
	// against writes, and a run sets up while another run's workers write.
	`DO $$ BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'harness_rows_log' AND tgrelid = 'harness_rows'::regclass) THEN
			CREATE TRIGGER harness_rows_log AFTER INSERT OR UPDATE ON harness_rows
				FOR EACH ROW EXECUTE FUNCTION harness_log_row();
		END IF;
	END $$`,
}

// schemaLock is the advisory lock (pg_advisory_lock's key) that runs
// sharing a database hold while they create its tables: PostgreSQL's
// CREATE ... IF NOT EXISTS is not safe against a concurrent twin (one
// fails on a unique index of the catalog), and a fenced run and its
// control set up at once.
const schemaLock = 0x66656e6365 // "fence"

// withSchemaLock runs fn holding schemaLock on a connection of pool's.
func withSchemaLock(ctx context.Context, pool *pgxpool.Pool, fn func() error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", schemaLock); err != nil {
		return fmt.Errorf("harness: schema lock: %w", err)
	}
	fnErr := fn()
	if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", schemaLock); err != nil {
		// The lock would outlive this run in the pool's connection.
		conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
	}
	return fnErr
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
