package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
)

// DefaultStoreTable is the table a [Store] uses unless [WithStoreTable]
// names another.
const DefaultStoreTable = "fencelock_store"

// Store is a [fence.Store] kept in a PostgreSQL table
// (key text PRIMARY KEY, token bigint NOT NULL, value bytea NOT NULL; see
// [Store.CreateTable]). Each Put is one fenced upsert ([Table.Upsert]).
//
// Create one with [NewStore]; the zero Store is not usable. A Store is safe
// for concurrent use when its handle is (a *pgxpool.Pool is; a *pgx.Conn is
// not).
type Store struct {
	db        DB
	table     *Table
	getSQL    string
	createSQL string
}

var _ fence.Store = (*Store)(nil)

// NewStore returns a Store that reads and writes through db. It fails on a
// nil db or an invalid option, before any I/O.
func NewStore(db DB, opts ...StoreOption) (*Store, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	o := storeOptions{table: pgx.Identifier{DefaultStoreTable}}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil StoreOption", ErrInvalidArgument)
		}
		opt.applyStore(&o)
	}
	t, err := NewTable(o.table, WithKeyColumn("key"), WithFenceColumn("token"))
	if err != nil {
		return nil, err
	}
	return &Store{
		db:        db,
		table:     t,
		getSQL:    "SELECT value, token FROM " + t.name + " WHERE key = $1",
		createSQL: "CREATE TABLE IF NOT EXISTS " + t.name + " (key text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0), value bytea NOT NULL)",
	}, nil
}

// CreateTable creates the store's table if it does not exist. ctx bounds the
// call.
func (s *Store) CreateTable(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, s.createSQL); err != nil {
		return fmt.Errorf("postgres: create store table %s: %w", s.table.label, classify(err))
	}
	return nil
}

// Put writes value under key with token, unless the key holds a higher
// token; see [fence.Store] for the contract. A nil value is stored as an
// empty one. ctx bounds the call; see [Table.Update] for what is left when it
// ends.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return s.table.upsert(ctx, s.db, key, token, key, []Assignment{Set("value", value)})
}

// Get returns the record under key, or an error matching [fence.ErrNotFound].
// ctx bounds the call.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if key == "" {
		return fence.Record{}, fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if err := checkCtx(ctx); err != nil {
		return fence.Record{}, err
	}
	var r fence.Record
	var tok int64
	err := s.db.QueryRow(ctx, s.getSQL, key).Scan(&r.Value, &tok)
	if errors.Is(err, pgx.ErrNoRows) {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	if err != nil {
		return fence.Record{}, fmt.Errorf("postgres: get %q: %w", key, classify(err))
	}
	r.Token = fence.Token(tok)
	return r, nil
}
