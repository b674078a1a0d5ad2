package sqlfence

import "context"

// CreateSchema creates the [DefaultFenceTable] and the [DefaultStoreTable]
// in dialect d if they do not exist. ctx bounds the call. Run it once, at
// deployment.
func CreateSchema(ctx context.Context, db DB, d Dialect) error {
	s, err := NewStore(db, d, Identifier{DefaultStoreTable})
	if err != nil {
		return err
	}
	f, err := NewFences(d, Identifier{DefaultFenceTable})
	if err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := f.CreateTable(ctx, db); err != nil {
		return err
	}
	return s.CreateTable(ctx)
}
