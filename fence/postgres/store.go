package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
)

// DefaultStoreTable is the table [CreateSchema] creates for a [Store]:
// NewStore(db, pgx.Identifier{postgres.DefaultStoreTable}).
const DefaultStoreTable = "fencelock_store"

// Store is a [fence.Store] kept in a PostgreSQL table
// (key text PRIMARY KEY, token bigint NOT NULL, value bytea; see
// [Store.CreateTable]). Each Put is one fenced upsert ([Table.Upsert]); a
// NULL value is the tombstone of [Store.Delete]. It implements
// [fence.Updater] too: [Store.GetForUpdate] is the read before a write,
// which claims the key, and [Store.Update] a read-modify-write.
//
// Create one with [NewStore]; the zero Store is not usable (its methods
// fail with [ErrInvalidArgument]). A Store is safe for concurrent use when
// its handle is (a *pgxpool.Pool is; a *pgx.Conn is not).
type Store struct {
	db    DB
	table *Table
	// The statements, set once by NewStore (storeSQL).
	getSQL, createSQL, claimSQL, swapSQL, floorSQL string
	// The claim's statements for a write that names an issuer, and the
	// read of a key's issuer.
	issuerGetSQL, issuerClaimSQL, issuerReadSQL string
	// issuerCol says whether the table has the IssuerColumn, once a write
	// naming an issuer has looked (issuerUnknown until then).
	issuerCol atomic.Int32
	// needIssuer refuses writes that name no issuer (RequireIssuer).
	needIssuer bool
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// NewStore returns a Store that keeps its records in the table called table
// (schema-qualified or not; [DefaultStoreTable] is the one [CreateSchema]
// creates) and reads and writes them through db. As with [NewTable] and
// [NewFences], the table is named by the constructor's argument; opts say
// where its writes report ([WithMeterProvider], [WithTracerProvider]) and
// whether its writes must name their tokens' issuer ([RequireIssuer]). It
// fails on a nil db ([ErrInvalidArgument]), an unusable name
// ([ErrInvalidIdentifier]) or an invalid option ([ErrInvalidOption]),
// before any I/O.
func NewStore(db DB, table pgx.Identifier, opts ...StoreOption) (*Store, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	o := storeOptions{table: []TableOption{WithKeyColumn("key"), WithFenceColumn("token")}}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil StoreOption", ErrInvalidOption)
		}
		opt.applyStore(&o)
	}
	t, err := NewTable(table, o.table...)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, table: t, needIssuer: o.needIssuer}
	storeSQL(s, t.name)
	return s, nil
}

// storeSQL builds the statements of a [Store] on the table quoted q.
func storeSQL(s *Store, q string) {
	s.getSQL = "SELECT value, token, value IS NULL FROM " + q + " WHERE key = $1"
	s.createSQL = "CREATE TABLE IF NOT EXISTS " + q + " (key text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0), value bytea)"
	// A key with no row gets a floor-only row, the tombstone of Delete.
	s.claimSQL = "INSERT INTO " + q + " AS cur (key, token, value) VALUES ($1, $2, NULL)" +
		" ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token WHERE cur.token <= EXCLUDED.token" +
		" RETURNING value, value IS NULL"
	s.swapSQL = "UPDATE " + q + " SET value = $3 WHERE key = $1 AND token = $2 AND value IS NOT DISTINCT FROM $4"
	s.floorSQL = "SELECT token FROM " + q + " WHERE key = $1"
	s.issuerGetSQL, s.issuerClaimSQL = issuerGetSQL(q), issuerClaimSQL(q)
	s.issuerReadSQL = "SELECT " + IssuerColumn + " FROM " + q + " WHERE key = $1"
}

// CreateTable creates the store's table if it does not exist. ctx bounds the
// call.
func (s *Store) CreateTable(ctx context.Context) error {
	if err := cmp.Or(s.check(), checkCtx(ctx)); err != nil {
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
	return s.write(ctx, key, token, value)
}

// Delete removes the record under key, fenced like [Store.Put]: it leaves a
// tombstone (the row, with token and a NULL value) unless the key holds a
// higher token. The tombstone keeps the key's floor, so a stale Put or
// Delete after it is refused with [fence.ErrStale]; [Store.Get] reports it
// as [fence.ErrNotFound], and a Put with a token at least as high writes
// the key again. Deleting a key never written leaves a tombstone too.
//
// A plain DELETE of the row removes the floor with it: the next Put with any
// token lands as on a new key. Remove tombstones only once no holder that
// could write the key with an older token is left.
//
// A table created before tombstones existed has value NOT NULL; Delete then
// fails with [ErrSchema], writing nothing, until the column allows NULL:
//
//	ALTER TABLE fencelock_store ALTER COLUMN value DROP NOT NULL;
//
// Errors and the role of ctx are those of [Store.Put].
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	return s.write(ctx, key, token, nil)
}

// write is a Put of value, or, value nil, a Delete's tombstone.
func (s *Store) write(ctx context.Context, key string, token fence.Token, value any) error {
	if err := cmp.Or(s.check(), checkCtx(ctx)); err != nil {
		return err
	}
	t := s.table
	op := t.tel.Put
	if value == nil {
		op = t.tel.Delete
	}
	if err := checkWrite(ctx, s.db, key, token); err != nil {
		return err // before issuerOf's I/O
	}
	if err := s.needsIssuer(ctx, key); err != nil {
		return err
	}
	set, build := []Assignment{Set("value", value)}, t.upsertSQL
	iss, err := s.issuerOf(ctx)
	if err != nil {
		return err
	}
	if iss != "" {
		set, build = append(set, Set(IssuerColumn, iss)), t.issuerSQL
	}
	sql, args, err := t.prepare(ctx, s.db, key, token, set, build)
	if err != nil {
		return err
	}
	resource := func() string { return key }
	return t.tel.write(ctx, op, token, resource, func(ctx context.Context) error {
		var vet func(context.Context, *pgx.Conn) error
		if iss != "" {
			vet = s.sameIssuer(key, iss)
		}
		err := t.upsert(ctx, s.db, key, token, resource, sql, args, false, vet) // CreateTable makes the columns
		if iss != "" {
			err = s.mismatch(ctx, key, token, iss, err)
		}
		if value == nil {
			return s.tombstoneErr(err)
		}
		return err
	})
}

// tombstoneErr is err, the error of a statement that wrote a tombstone (a
// NULL value), or when the table's value column is NOT NULL (a table made
// before tombstones existed) an error matching [ErrSchema] that says how to
// allow it.
func (s *Store) tombstoneErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23502" { // not_null_violation
		return fmt.Errorf("%w: %s.value is NOT NULL and cannot hold a tombstone; ALTER TABLE %s ALTER COLUMN value DROP NOT NULL: %w",
			ErrSchema, s.table.label, s.table.name, err)
	}
	return err
}

// Get returns the record under key, or an error matching [fence.ErrNotFound].
// ctx bounds the call.
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
	err := s.db.QueryRow(ctx, s.getSQL, key).Scan(&r.Value, &tok, &deleted)
	if errors.Is(err, pgx.ErrNoRows) || deleted {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	if err != nil {
		return fence.Record{}, fmt.Errorf("postgres: get %q: %w", key, classify(err))
	}
	r.Token = fence.Token(tok)
	return r, nil
}
