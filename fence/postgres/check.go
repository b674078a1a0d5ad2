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

// check refuses a nil or zero Table, which would otherwise panic.
func (t *Table) check() error {
	if t == nil || t.tel == nil {
		return fmt.Errorf("%w: a nil or zero Table; create one with NewTable", ErrInvalidArgument)
	}
	return nil
}

// check refuses a nil or zero Fences, which would otherwise panic or send
// empty statements.
func (f *Fences) check() error {
	if f == nil || f.tel == nil {
		return fmt.Errorf("%w: a nil or zero Fences; create one with NewFences", ErrInvalidArgument)
	}
	return nil
}

// check refuses a nil or zero Store, which would otherwise panic.
func (s *Store) check() error {
	if s == nil || s.table == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with NewStore", ErrInvalidArgument)
	}
	return nil
}
