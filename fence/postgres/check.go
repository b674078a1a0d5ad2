package postgres

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// checkDB refuses a nil handle, including a typed nil such as a nil
// *pgxpool.Pool, which would otherwise panic on first use.
func checkDB(db any) error {
	switch {
	case db == nil:
		return fmt.Errorf("%w: nil DB", ErrInvalidArgument)
	case nilcheck.IsNil(db):
		return fmt.Errorf("%w: nil %T", ErrInvalidArgument, db)
	}
	return nil
}

// checkCtx refuses a nil context with an error rather than a panic, and
// returns the context's error if it has ended.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}
