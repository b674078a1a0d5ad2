package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// Exec runs query, one statement with its args in the driver's placeholder
// form, fenced on resource: it is [Fences.RunInTx] with a function that
// runs query alone, and returns the number of rows it affected (in MySQL,
// without clientFoundRows, the rows it changed). database/sql has no
// batch, so unlike fence/postgres's Exec this costs the round trips of a
// transaction: BEGIN, the fence, query, COMMIT. Errors are those of
// RunInTx.
func (f *Fences) Exec(ctx context.Context, db TxBeginner, resource string, token fence.Token, query string, args ...any) (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if query == "" {
		return 0, fmt.Errorf("%w: Exec: empty statement", ErrInvalidArgument)
	}
	var n int64
	err := f.runInTx(ctx, f.tel.Exec, db, resource, token, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	}, nil)
	if err != nil {
		return 0, err
	}
	return n, nil
}
