package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TableOption configures a [Table]. Create one with [WithKeyColumn],
// [WithFenceColumn], or any [Option] ([WithMeterProvider],
// [WithTracerProvider]); the interface is sealed. An option only records its
// value: [NewTable] checks them all and fails, with an error matching
// [ErrInvalidOption], on the first invalid one.
type TableOption interface{ applyTable(*tableOptions) }

// TxOption configures one fenced transaction ([RunInTx], [Fences.RunInTx]).
// Create one with [WithTxOptions], [WithIsolation], [WithPreemptAfter] or
// [WithoutPreemption]; the interface is sealed. RunInTx checks them before any I/O and fails, with an error
// matching [ErrInvalidOption], on an invalid one.
//
// It is a type of its own, not a [TableOption], because it configures a
// call rather than a value: each kind is accepted only where it applies.
type TxOption interface{ applyTx(*txConfig) }

type tableOptions struct {
	key, fence   string
	tel          telemetryOptions
	preemptAfter time.Duration
	invalid      error // an option's invalid value
}

type tableOptionFunc func(*tableOptions)

func (f tableOptionFunc) applyTable(o *tableOptions) { f(o) }

// txConfig is one fenced transaction's configuration.
type txConfig struct {
	pgx pgx.TxOptions
	// preemptAfter is how long the guard waits before it ends older
	// tokens' transactions that block it; 0 never.
	preemptAfter time.Duration
	invalid      error // an option's invalid value
}

type txOptionFunc func(*txConfig)

func (f txOptionFunc) applyTx(o *txConfig) { f(o) }

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
// "fence". Empty, or the key column's name, makes [NewTable] fail.
func WithFenceColumn(name string) TableOption {
	return tableOptionFunc(func(o *tableOptions) { o.fence = name })
}

// WithTxOptions sets the options a fenced transaction begins with, as
// pgx's BeginTx takes them. Default: none (the zero pgx.TxOptions), which
// begins with the server's defaults, normally READ COMMITTED, read-write.
// A later [WithIsolation] overrides IsoLevel.
//
// IsoLevel must be empty or one of pgx's four levels (pgx.ReadUncommitted
// runs as READ COMMITTED); AccessMode must not be pgx.ReadOnly, since the
// transaction writes its fence first; DeferrableMode must be empty or one
// of pgx's two. BeginQuery and CommitQuery replace the BEGIN and COMMIT
// statements: they must still begin and commit one read-write transaction,
// or nothing is fenced. Any other value, or any option at all when the
// handle is a pgx.Tx (whose transaction began before the call), makes the
// call fail before any I/O.
func WithTxOptions(opts pgx.TxOptions) TxOption {
	return txOptionFunc(func(o *txConfig) { o.pgx = opts })
}

// WithIsolation sets the isolation level of a fenced transaction:
// pgx.ReadCommitted, pgx.RepeatableRead or pgx.Serializable (or
// pgx.ReadUncommitted, which PostgreSQL runs as READ COMMITTED). Default:
// the server's default_transaction_isolation, normally READ COMMITTED. It is
// [WithTxOptions] for the IsoLevel alone, and is refused the same way.
func WithIsolation(level pgx.TxIsoLevel) TxOption {
	return txOptionFunc(func(o *txConfig) { o.pgx.IsoLevel = level })
}

// PreemptOption is an option of both a fenced transaction ([TxOption]) and
// a [Table] ([TableOption]): how long a statement that claims a fence
// waits on another transaction before it ends an older token's
// transaction that blocks it. Create one with [WithPreemptAfter] or
// [WithoutPreemption].
type PreemptOption interface {
	TxOption
	TableOption
}

type preemptOption struct {
	after   time.Duration
	invalid error
}

func (o preemptOption) applyTx(c *txConfig) {
	c.preemptAfter = o.after
	if o.invalid != nil {
		c.invalid = o.invalid
	}
}

func (o preemptOption) applyTable(t *tableOptions) {
	t.preemptAfter = o.after
	if o.invalid != nil {
		t.invalid = o.invalid
	}
}

// WithPreemptAfter sets how long a statement that claims a fence (a fenced
// transaction's guard, before fn runs; a [Table]'s Update, Upsert and
// GetForUpdate) waits on another transaction before it looks at what
// blocks it, and ends the session of every blocker that is a fenced
// transaction of older tokens only (see "A frozen holder" in the package
// doc). It is looked at again every 250 ms until the statement returns.
// Default 100 ms. d must be positive.
//
// Unlike the other TxOptions it applies on a pgx.Tx too.
func WithPreemptAfter(d time.Duration) PreemptOption {
	o := preemptOption{after: d}
	if d <= 0 {
		o.invalid = fmt.Errorf("%w: WithPreemptAfter(%v): want > 0 (WithoutPreemption turns preemption off)", ErrInvalidOption, d)
	}
	return o
}

// WithoutPreemption makes a statement that claims a fence wait for
// whatever blocks it for as long as ctx allows, and end nothing: the
// behaviour before preemption, for a role that may not end other sessions,
// or to see what preemption saves. A holder frozen with its transaction
// open then stalls the next one for as long as it stays frozen. Default:
// preemption on ([WithPreemptAfter]).
//
// Unlike the other TxOptions it applies on a pgx.Tx too.
func WithoutPreemption() PreemptOption { return preemptOption{} }

// newTableOptions records opts over the defaults and checks the result.
func newTableOptions(opts []TableOption) (tableOptions, error) {
	o := tableOptions{key: "key", fence: "fence", preemptAfter: defaultPreemptAfter}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil TableOption", ErrInvalidOption)
		}
		opt.applyTable(&o)
		if o.invalid != nil {
			return o, o.invalid
		}
	}
	if err := checkIdent("key column", o.key); err != nil {
		return o, fmt.Errorf("%w: WithKeyColumn: %w", ErrInvalidOption, err)
	}
	if err := checkIdent("fence column", o.fence); err != nil {
		return o, fmt.Errorf("%w: WithFenceColumn: %w", ErrInvalidOption, err)
	}
	if o.key == o.fence {
		return o, fmt.Errorf("%w: key and fence column are both %q", ErrInvalidOption, o.key)
	}
	return o, o.tel.check()
}

// newTxOptions records opts and checks the result.
func newTxOptions(opts []TxOption) (txConfig, error) {
	c := txConfig{preemptAfter: defaultPreemptAfter}
	for _, opt := range opts {
		if opt == nil {
			return c, fmt.Errorf("%w: nil TxOption", ErrInvalidOption)
		}
		opt.applyTx(&c)
		if c.invalid != nil {
			return c, c.invalid
		}
	}
	return c, checkPgxTxOptions(c.pgx)
}

// checkPgxTxOptions checks the pgx options of a fenced transaction.
func checkPgxTxOptions(o pgx.TxOptions) error {
	switch o.IsoLevel {
	case "", pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable, pgx.ReadUncommitted:
	default:
		return fmt.Errorf("%w: isolation level %q", ErrInvalidOption, o.IsoLevel)
	}
	switch o.AccessMode {
	case "", pgx.ReadWrite:
	default:
		return fmt.Errorf("%w: access mode %q: a fenced transaction writes its fence", ErrInvalidOption, o.AccessMode)
	}
	switch o.DeferrableMode {
	case "", pgx.Deferrable, pgx.NotDeferrable:
	default:
		return fmt.Errorf("%w: deferrable mode %q", ErrInvalidOption, o.DeferrableMode)
	}
	return nil
}
