package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// CreateSchema creates the [DefaultFenceTable] and the [DefaultStoreTable]
// if they do not exist, as the SQL in the package documentation does. ctx
// bounds the call. Run it once, at deployment: concurrent CREATE TABLE IF
// NOT EXISTS can fail in PostgreSQL.
func CreateSchema(ctx context.Context, db DB) error {
	s, err := NewStore(db, pgx.Identifier{DefaultStoreTable})
	if err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := defaultFences().CreateTable(ctx, db); err != nil {
		return err
	}
	return s.CreateTable(ctx)
}
