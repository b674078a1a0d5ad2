package harness

import (
	"context"
	"database/sql"
	"errors"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// sqlResource is a row of harness_sqlrows in the run's SQLite database
// file, which every worker process opens: fenced, written with
// fence/sql's Table.Upsert; in the control, with the plain upsert.
type sqlResource struct {
	db    *sql.DB
	table *sqlfence.Table
	busy  func() // when set, called each time the control's statement found the lock taken (tests)
}

func openSQLResource(path string) (sqlResource, error) {
	db, err := openSQLite(path)
	if err != nil {
		return sqlResource{}, err
	}
	t, err := sqlfence.NewTable(sqlfence.SQLite, sqlfence.Identifier{sqlRowsTable})
	if err != nil {
		_ = db.Close()
		return sqlResource{}, err
	}
	return sqlResource{db: db, table: t}, nil
}

func (s sqlResource) write(ctx context.Context, fenced bool, key string, tok fence.Token, val string) error {
	if fenced {
		return s.table.Upsert(ctx, s.db, key, tok, sqlfence.Set("val", val))
	}
	return retryBusy(ctx, func() error {
		err := s.plainUpsert(ctx, key, tok, val)
		if s.busy != nil && sqliteBusy(err) {
			s.busy()
		}
		return err
	})
}

// plainUpsert is the control's write: the upsert with no fence.
func (s sqlResource) plainUpsert(ctx context.Context, key string, tok fence.Token, val string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO `+sqlRowsTable+` (key, val, fence) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET val = excluded.val, fence = excluded.fence`, key, val, int64(tok))
	return err
}

func (s sqlResource) read(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT val FROM `+sqlRowsTable+` WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// retryBusy runs the control's plain statement again while SQLite says it
// could not take the write lock (SQLITE_BUSY, SQLITE_LOCKED: nothing was
// written), as fence/sql does for fenced writes, so that a busy database is
// not a write of unknown outcome in one run and a retried one in the other.
func retryBusy(ctx context.Context, stmt func() error) error {
	for {
		err := stmt()
		if !sqliteBusy(err) {
			return err
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED
// (the primary result codes 5 and 6, in the driver's error's Code).
func sqliteBusy(err error) bool {
	var se interface{ Code() int }
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == 5 || c == 6
}
