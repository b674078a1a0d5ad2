package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TableOption configures a [Table]. Create one with [WithKeyColumn] or
// [WithFenceColumn].
type TableOption interface{ applyTable(*tableOptions) }

// TxOption configures a fenced transaction ([RunInTx], [Fences.RunInTx]).
// Create one with [WithIsolation].
type TxOption interface{ applyTx(*txOptions) }

// StoreOption configures a [Store]. Create one with [WithStoreTable].
type StoreOption interface{ applyStore(*storeOptions) }

type tableOptions struct{ key, fence string }

type txOptions struct{ iso pgx.TxIsoLevel }

type storeOptions struct{ table pgx.Identifier }

type tableOptionFunc func(*tableOptions)

func (f tableOptionFunc) applyTable(o *tableOptions) { f(o) }

type txOptionFunc func(*txOptions)

func (f txOptionFunc) applyTx(o *txOptions) { f(o) }

type storeOptionFunc func(*storeOptions)

func (f storeOptionFunc) applyStore(o *storeOptions) { f(o) }

// WithKeyColumn names the column that identifies a row of a [Table]. It must
// be unique by itself: the primary key, or a column with a unique index on
// it alone that is not partial. [Table.Upsert] needs that of the server;
// [Table.Update] checks it on its first use of the Table. Default "key".
// Empty makes [NewTable] fail.
func WithKeyColumn(name string) TableOption {
	return tableOptionFunc(func(o *tableOptions) { o.key = name })
}

// WithFenceColumn names the bigint column of a [Table] that holds the
// highest token written to each row. Declare it NOT NULL DEFAULT 0. Default
// "fence". Empty makes [NewTable] fail.
func WithFenceColumn(name string) TableOption {
	return tableOptionFunc(func(o *tableOptions) { o.fence = name })
}

// WithIsolation sets the isolation level of a fenced transaction:
// pgx.ReadCommitted, pgx.RepeatableRead or pgx.Serializable (or
// pgx.ReadUncommitted, which PostgreSQL runs as READ COMMITTED). Default:
// the server's default_transaction_isolation, normally READ COMMITTED. Any
// other value makes the call fail before any I/O, as does giving it when the
// handle is a pgx.Tx, whose isolation was fixed when it began.
func WithIsolation(level pgx.TxIsoLevel) TxOption {
	return txOptionFunc(func(o *txOptions) { o.iso = level })
}

// WithStoreTable names the table a [Store] keeps its records in. Default
// [DefaultStoreTable]. An invalid name makes [NewStore] fail.
func WithStoreTable(name pgx.Identifier) StoreOption {
	return storeOptionFunc(func(o *storeOptions) { o.table = name })
}

func newTxOptions(opts []TxOption) (txOptions, error) {
	var o txOptions
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil TxOption", ErrInvalidArgument)
		}
		opt.applyTx(&o)
	}
	switch o.iso {
	case "", pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable, pgx.ReadUncommitted:
		return o, nil
	}
	return o, fmt.Errorf("%w: isolation level %q", ErrInvalidArgument, o.iso)
}
