package pgadvisory

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// DB is what [CreateSequence] needs: *pgx.Conn, *pgxpool.Pool and pgx.Tx
// are DBs.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateSequence creates the sequence the tokens come from, if it does not
// exist ([WithSequence] names it; [DefaultSequence] otherwise). Run it
// once, as a migration, before the first [Acquire]. ctx bounds it.
func CreateSequence(ctx context.Context, db DB, opts ...Option) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if nilcheck.IsNil(db) {
		return fmt.Errorf("%w: nil DB", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, "CREATE SEQUENCE IF NOT EXISTS "+o.sequence.Sanitize()); err != nil {
		return fmt.Errorf("pgadvisory: creating sequence %s: %w", o.sequence.Sanitize(), err)
	}
	return nil
}
