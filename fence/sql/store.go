package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// DefaultStoreTable is the table [CreateSchema] creates for a [Store].
const DefaultStoreTable = "fencelock_store"

// Store is a [fence.Store] kept in a table (key PRIMARY KEY, token BIGINT
// NOT NULL, value a byte string; see [Store.CreateTable]). Each Put is one
// fenced upsert ([Table.Upsert]); a NULL value is the tombstone of
// [Store.Delete], or the floor alone of a key [Store.GetForUpdate] claimed
// before it had a value.
//
// Create one with [NewStore]; the zero Store is not usable. A Store is
// safe for concurrent use when its handle is (a *sql.DB is).
type Store struct {
	db        DB
	table     *Table
	value     string // the value column, quoted
	getSQL    string
	createSQL string
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// NewStore returns a Store that keeps its records in the table called
// table, in dialect d, read and written through db. It fails on a nil db
// ([ErrInvalidArgument]), an unusable name ([ErrInvalidIdentifier]) or an
// invalid option or dialect ([ErrInvalidOption]), before any I/O.
func NewStore(db DB, d Dialect, table Identifier, opts ...Option) (*Store, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	tableOpts := []TableOption{WithKeyColumn("key"), WithFenceColumn("token")}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		tableOpts = append(tableOpts, o)
	}
	t, err := NewTable(d, table, tableOpts...)
	if err != nil {
		return nil, err
	}
	t.signal = true // CreateTable makes no AUTO_INCREMENT column
	value, _ := quoteIdent(d, "column", "value")
	get := &stmt{d: d}
	get.sql("SELECT ", value, ", ", t.fence, ", ", value, " IS NULL FROM ", t.name, " WHERE ", t.key, " = ").arg("")
	return &Store{
		db:     db,
		table:  t,
		value:  value,
		getSQL: get.String(),
		createSQL: "CREATE TABLE IF NOT EXISTS " + t.name + " (" + d.keyColumnDDL("key") +
			", " + t.fence + " BIGINT NOT NULL CHECK (" + t.fence + " > 0), " + value + " " + d.blobType() + ")" + d.tableSuffix(),
	}, nil
}

// CreateTable creates the store's table if it does not exist. ctx bounds
// the call.
func (s *Store) CreateTable(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.createSQL); err != nil {
		return fmt.Errorf("sqlfence: create store table %s: %w", s.table.label, s.table.d.classify(err))
	}
	return nil
}

// Put writes value under key with token, unless the key holds a higher
// token; see [fence.Store] for the contract and [Table.Upsert] for the
// statement and its errors. A nil value is stored as an empty one. ctx
// bounds the call, retries included.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	return s.table.upsert(ctx, s.db, s.table.tel.Put, key, token, []Assignment{Set("value", value)})
}

// Delete removes the record under key, fenced like [Store.Put]: it leaves
// a tombstone (the row, with token and a NULL value) unless the key holds
// a higher token. The tombstone keeps the key's floor, so a stale Put or
// Delete after it is refused with [fence.ErrStale]; [Store.Get] reports
// it as [fence.ErrNotFound]. A plain DELETE of the row removes the floor
// with it.
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.table.upsert(ctx, s.db, s.table.tel.Delete, key, token, []Assignment{Set("value", nil)})
}

// Get returns the record under key, or an error matching
// [fence.ErrNotFound]. ctx bounds the call.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.check(); err != nil {
		return fence.Record{}, err
	}
	if key == "" {
		return fence.Record{}, fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if err := checkCtx(ctx); err != nil {
		return fence.Record{}, err
	}
	var r fence.Record
	var tok int64
	var deleted bool
	err := s.db.QueryRowContext(ctx, s.getSQL, key).Scan(&r.Value, &tok, &deleted)
	if errors.Is(err, sql.ErrNoRows) || err == nil && deleted {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	if err != nil {
		return fence.Record{}, fmt.Errorf("sqlfence: get %q: %w", key, s.table.d.classify(err))
	}
	if r.Value == nil {
		r.Value = []byte{}
	}
	r.Token = fence.Token(tok)
	return r, nil
}

// check refuses a nil or zero Store, which would otherwise panic.
func (s *Store) check() error {
	if s == nil || s.table == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with NewStore", ErrInvalidArgument)
	}
	return nil
}
